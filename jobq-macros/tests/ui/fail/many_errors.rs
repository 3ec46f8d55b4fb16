use jobq_runtime::job;

struct Mailer;

impl Mailer {
    #[job(queue = "mail", queue = "sms", timeout = "soon", retries = 3)]
    fn send<T>(&self, (a, b): (u32, u32), value: &T) {
        let _ = (a, b, value);
    }
}

fn main() {}
