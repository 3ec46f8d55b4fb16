use jobq_runtime::job;

#[job(key = "import:{paths}")]
async fn import(paths: Vec<String>) {
    let _ = paths;
}

fn main() {}
