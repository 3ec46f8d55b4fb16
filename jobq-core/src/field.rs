//! What a job's payload looks like from outside the program: its fields'
//! names and types, and which of them may be left out. Published by
//! workers (see `jobq_runtime::Jobq::job_kinds`) so that a tool enqueueing
//! a job by name and JSON (`jobq enqueue`) can check the payload before it
//! is stored, rather than the worker failing the job when it decodes it.

/// One field of a job's payload struct, as `#[job]` generated it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    /// The field's name, as stored in the payload's JSON.
    pub name: &'static str,
    /// Its Rust type, as written (`u64`, `Option<String>`).
    pub type_name: &'static str,
    /// Whether the payload must have it: `false` for a field whose type is
    /// written as an `Option<…>`, which serde decodes from a missing field
    /// as `None`. (An alias of `Option` counts as required: a check by
    /// these fields may then refuse a payload serde would take, never the
    /// other way round.)
    pub required: bool,
}
