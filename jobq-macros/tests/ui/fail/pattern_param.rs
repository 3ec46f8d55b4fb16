use jobq_runtime::job;

#[job]
async fn resize((width, height): (u32, u32)) {
    let _ = (width, height);
}

fn main() {}
