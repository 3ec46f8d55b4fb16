use jobq_runtime::job;

#[job(tags = "billing")]
async fn not_a_list() {}

#[job(tags = ["billing", "billing"])]
async fn twice() {}

#[job(tags = [""])]
async fn empty() {}

fn main() {}
