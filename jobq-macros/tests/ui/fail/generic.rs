use jobq_runtime::job;

#[job]
async fn store<T>(value: T)
where
    T: serde::Serialize,
{
    let _ = value;
}

fn main() {}
