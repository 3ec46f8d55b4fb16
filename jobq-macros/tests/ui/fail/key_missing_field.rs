use jobq_runtime::job;

#[job(key = "welcome:{user}:{locale}")]
async fn send_welcome(user_id: u64, locale: String) {
    let _ = (user_id, locale);
}

#[job(key = "report:{day")]
async fn unclosed(day: u32) {
    let _ = day;
}

#[job(key = "nightly:{date}")]
async fn nightly() {}

fn main() {}
