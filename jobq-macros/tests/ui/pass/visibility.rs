//! The payload struct, its fields and `new` take the fn's visibility.
#![deny(warnings)]

mod jobs {
    use jobq_runtime::job;

    /// Public job.
    #[job]
    pub async fn public_job(user_id: u64) {
        let _ = user_id;
    }

    #[job]
    pub(crate) async fn crate_job(user_id: u64) {
        let _ = user_id;
    }

    // Private: `new` unused, and no dead-code warning for it.
    #[job]
    async fn private_job(user_id: u64) {
        let _ = user_id;
    }
}

fn main() {
    let job = jobs::PublicJob::new(1);
    let _ = job.user_id;
    let job = jobs::CrateJob { user_id: 2 };
    let _ = job.user_id;
}
