use jobq_runtime::{JobContext, State, job};

struct Mailer;

#[job]
async fn by_reference(mailer: &State<Mailer>, ctx: &mut JobContext) {
    let _ = (mailer, ctx);
}

fn main() {}
