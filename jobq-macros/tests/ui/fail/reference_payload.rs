use jobq_runtime::job;

#[job]
async fn greet(name: &str, tags: Vec<&'static str>) {
    let _ = (name, tags);
}

fn main() {}
