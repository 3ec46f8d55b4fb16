//! `#[job(...)]` arguments and the annotated fn → a validated [`Model`].
//!
//! Nothing here stops at the first problem: every bad key, value and
//! parameter is collected into one [`Errors`] and reported together, each
//! spanned on the token at fault.

use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote};
use syn::ext::IdentExt;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{
    Attribute, Expr, ExprLit, FnArg, GenericArgument, Ident, ItemFn, Lit, LitInt, LitStr, Pat,
    Path, PathArguments, Signature, Type, TypePath, UnOp, Visibility,
};

/// The keys `#[job(...)]` accepts, in the order the docs list them.
const KEYS: &[&str] = &[
    "name",
    "queue",
    "priority",
    "max_attempts",
    "timeout",
    "backoff",
    "retry",
    "key",
    "unique",
    "unique_for",
    "concurrency_key",
    "concurrency",
    "tags",
    "crate",
];

/// The values `unique = "…"` accepts, each with the `Unique` constructor it
/// names.
pub(crate) const UNIQUE_STATES: &[(&str, &str)] = &[
    ("pending", "while_pending"),
    ("active", "while_active"),
    ("active_or_failed", "while_active_or_failed"),
];

/// A `#[job]` fn, checked and ready to expand.
pub(crate) struct Model {
    /// The user's fn, emitted unchanged.
    pub(crate) func: ItemFn,
    /// Root of the runtime crate: `::jobq_runtime` unless `crate = …` says otherwise.
    pub(crate) krate: Path,
    /// The payload struct's name: the fn name in PascalCase.
    pub(crate) payload: Ident,
    /// The stored job name: `name = "…"` or the fn name.
    pub(crate) name: String,
    pub(crate) queue: Option<LitStr>,
    pub(crate) priority: Option<i16>,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) retry: Option<Retry>,
    pub(crate) key: Option<KeyTemplate>,
    /// `unique = "…"`: the `Unique` constructor of the states given.
    pub(crate) unique: Option<&'static str>,
    /// `unique_for = "…"`.
    pub(crate) unique_for: Option<Duration>,
    /// `concurrency_key = "…"`.
    pub(crate) concurrency_key: Option<KeyTemplate>,
    /// `concurrency = N`, within 1 to [`MAX_KEY_CONCURRENCY`].
    pub(crate) concurrency: Option<u32>,
    /// `tags = ["…", …]`, checked as an enqueue checks them.
    pub(crate) tags: Vec<String>,
    /// The fn's parameters, in order.
    pub(crate) params: Vec<Param>,
}

impl Model {
    /// The payload fields, in parameter order.
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&Ident, &Type)> {
        self.params.iter().filter_map(|param| match param {
            Param::Payload { ident, ty } => Some((ident, ty)),
            Param::Context { .. } | Param::State { .. } => None,
        })
    }

    /// The fn's visibility, given to the payload struct, its fields and `new`.
    pub(crate) fn vis(&self) -> &Visibility {
        &self.func.vis
    }
}

/// One parameter of the job fn.
pub(crate) enum Param {
    /// `JobContext` (by value) or `&JobContext`.
    Context { by_ref: bool },
    /// `State<T>`, injected from the worker; `ty` is `T`.
    State { ty: Type },
    /// Anything else: a field of the payload struct.
    Payload { ident: Ident, ty: Type },
}

/// The retry policy given by `backoff = …` or `retry = […]`.
pub(crate) enum Retry {
    Exponential { base: Duration, max: Duration },
    Fixed(Duration),
    Linear { step: Duration, max: Duration },
    Schedule(Vec<Duration>),
}

/// `key = "…"` or `concurrency_key = "…"`, rewritten for `format!`: every
/// `{field}` became `{}` (or `{:spec}`) and the fields it named, in order,
/// are in `args`.
pub(crate) struct KeyTemplate {
    /// The template with positional placeholders, spanned on the user's literal.
    pub(crate) format: LitStr,
    /// The payload fields the placeholders name, in order.
    pub(crate) args: Vec<Ident>,
    /// The template as the user wrote it, published with the job.
    pub(crate) template: String,
}

/// Problems found so far, reported together.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    fn at(&mut self, tokens: impl ToTokens, message: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// Parses `#[job(args)]` on `item` into a [`Model`], or every problem found.
pub(crate) fn parse(args: TokenStream, item: TokenStream) -> syn::Result<Model> {
    let func: ItemFn = syn::parse2(item).map_err(|error| {
        syn::Error::new(
            error.span(),
            "`#[job]` goes on an `async fn`; this is not a fn",
        )
    })?;

    let mut errors = Errors::default();
    let mut raw = RawArgs::default();
    let parser = syn::meta::parser(|meta| raw.parse_key(&meta, &mut errors));
    if let Err(error) = parser.parse2(args) {
        errors.push(error);
    }

    let params = check_signature(&func.sig, &mut errors);
    let fields: Vec<&Ident> = params
        .iter()
        .filter_map(|param| match param {
            Param::Payload { ident, .. } => Some(ident),
            Param::Context { .. } | Param::State { .. } => None,
        })
        .collect();
    let key = raw
        .key
        .as_ref()
        .and_then(|lit| parse_key_template(lit, "key", &fields, &mut errors));
    let concurrency_key = raw
        .concurrency_key
        .as_ref()
        .and_then(|lit| parse_key_template(lit, "concurrency key", &fields, &mut errors));
    if raw.key.is_none() {
        let unique = raw.unique.as_ref().map(|(lit, _)| lit);
        let unique_for = raw.unique_for.as_ref().map(|(lit, _)| lit);
        for lit in [unique, unique_for].into_iter().flatten() {
            errors.at(
                lit,
                "a unique job needs a key to be unique by: add `key = \"…\"` (a template of payload fields, like `key = \"digest:{user_id}\"`)",
            );
        }
    }
    if raw.concurrency_key.is_none() {
        if let Some((lit, _)) = &raw.concurrency {
            errors.at(
                lit,
                "a per-key concurrency limit needs a key: add `concurrency_key = \"…\"` (a template of payload fields, like `concurrency_key = \"sync:{customer_id}\"`)",
            );
        }
    }
    let fn_name = func.sig.ident.unraw().to_string();
    match &raw.name {
        Some(lit) => check_name_len(&lit.value(), lit, &mut errors),
        None => check_name_len(&fn_name, &func.sig.ident, &mut errors),
    }
    errors.finish()?;

    Ok(Model {
        krate: raw
            .krate
            .unwrap_or_else(|| syn::parse_quote!(::jobq_runtime)),
        payload: Ident::new(&pascal_case(&fn_name), func.sig.ident.span()),
        name: raw.name.map_or(fn_name, |lit| lit.value()),
        queue: raw.queue,
        priority: raw.priority,
        max_attempts: raw.max_attempts,
        timeout: raw.timeout,
        retry: raw.retry.map(|(_, retry)| retry),
        key,
        unique: raw.unique.and_then(|(_, states)| states),
        unique_for: raw.unique_for.and_then(|(_, period)| period),
        concurrency_key,
        concurrency: raw.concurrency.and_then(|(_, limit)| limit),
        tags: raw.tags.unwrap_or_default(),
        params,
        func,
    })
}

/// `#[job(...)]` as given, each key checked on its own.
#[derive(Default)]
struct RawArgs {
    seen: Vec<String>,
    name: Option<LitStr>,
    queue: Option<LitStr>,
    priority: Option<i16>,
    max_attempts: Option<u32>,
    timeout: Option<Duration>,
    /// The policy and the key (`backoff` or `retry`) that gave it.
    retry: Option<(Ident, Retry)>,
    key: Option<LitStr>,
    /// `unique = "…"` as given, and the constructor it names if valid.
    unique: Option<(LitStr, Option<&'static str>)>,
    /// `unique_for = "…"` as given, and its period if valid.
    unique_for: Option<(LitStr, Option<Duration>)>,
    concurrency_key: Option<LitStr>,
    /// `concurrency = N` as given, and the limit if valid.
    concurrency: Option<(LitInt, Option<u32>)>,
    tags: Option<Vec<String>>,
    krate: Option<Path>,
}

impl RawArgs {
    /// One `key = value`. Returns `Err` only when the tokens cannot be read
    /// any further; a value that parses but is wrong is recorded in `errors`.
    fn parse_key(&mut self, meta: &ParseNestedMeta<'_>, errors: &mut Errors) -> syn::Result<()> {
        let Some(key) = meta.path.get_ident().map(Ident::unraw) else {
            let value = meta.value()?.parse::<Expr>();
            errors.at(
                &meta.path,
                unknown_key(&meta.path.to_token_stream().to_string()),
            );
            return value.map(drop);
        };
        let name = key.to_string();
        let value: Expr = meta.value()?.parse()?;

        if !KEYS.contains(&name.as_str()) {
            errors.at(&key, unknown_key(&name));
            return Ok(());
        }
        if self.seen.contains(&name) {
            errors.at(&key, format!("duplicate `{name}` key"));
            return Ok(());
        }
        self.seen.push(name.clone());

        match name.as_str() {
            "name" => self.name = non_empty_str(&value, "name", errors),
            "queue" => self.queue = non_empty_str(&value, "queue", errors),
            "priority" => self.priority = priority(&value, errors),
            "max_attempts" => self.max_attempts = max_attempts(&value, errors),
            "timeout" => {
                self.timeout = lit_str(&value, "timeout", "\"30s\"", errors).and_then(|lit| {
                    let timeout = duration(&lit, errors)?;
                    if timeout.is_zero() {
                        errors.at(&lit, "`timeout` must be longer than zero");
                        return None;
                    }
                    Some(timeout)
                });
            }
            "backoff" | "retry" => {
                let retry = if name == "backoff" {
                    backoff(&value, errors)
                } else {
                    schedule(&value, errors)
                };
                if let Some((first, _)) = &self.retry {
                    errors.at(
                        &key,
                        format!(
                            "`backoff` and `retry` cannot both be given: `{first}` already sets \
                             the retry policy (`backoff` is a formula, `retry` an explicit list)"
                        ),
                    );
                } else if let Some(retry) = retry {
                    self.retry = Some((key, retry));
                }
            }
            "key" => self.key = non_empty_str(&value, "key", errors),
            "unique" => {
                self.unique = lit_str(&value, "unique", "\"active\"", errors).map(|lit| {
                    let states = unique_states(&lit, errors);
                    (lit, states)
                });
            }
            "unique_for" => {
                self.unique_for = lit_str(&value, "unique_for", "\"1h\"", errors).map(|lit| {
                    let period = duration(&lit, errors).filter(|period| {
                        if period.is_zero() {
                            errors.at(&lit, "`unique_for` must be longer than zero");
                        }
                        !period.is_zero()
                    });
                    (lit, period)
                });
            }
            "concurrency_key" => {
                self.concurrency_key = non_empty_str(&value, "concurrency_key", errors);
            }
            "concurrency" => self.concurrency = concurrency(&value, errors),
            "tags" => self.tags = tags(&value, errors),
            "crate" => self.krate = crate_path(&value, errors),
            _ => unreachable!("every key in KEYS is handled"),
        }
        Ok(())
    }
}

/// The `Unique` constructor `unique = "…"` names, or an error listing the
/// values it takes.
fn unique_states(lit: &LitStr, errors: &mut Errors) -> Option<&'static str> {
    let value = lit.value();
    let found = UNIQUE_STATES.iter().find(|(name, _)| *name == value);
    if found.is_none() {
        let expected: Vec<String> = UNIQUE_STATES
            .iter()
            .map(|(name, _)| format!("`\"{name}\"`"))
            .collect();
        errors.at(
            lit,
            format!(
                "unknown `unique` states `{value}`; expected one of: {} (while waiting; while waiting or running; while waiting, running or failed)",
                expected.join(", ")
            ),
        );
    }
    found.map(|(_, constructor)| *constructor)
}

fn unknown_key(key: &str) -> String {
    let expected = KEYS
        .iter()
        .map(|key| format!("`{key}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut message = format!("unknown `#[job]` key `{key}`; expected one of: {expected}");
    if let Some(close) = KEYS
        .iter()
        .filter(|known| edit_distance(key, known) <= 2)
        .min_by_key(|known| edit_distance(key, known))
    {
        message.push_str(&format!(" (did you mean `{close}`?)"));
    }
    message
}

/// Levenshtein distance, for "did you mean" hints.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// A string literal, or an error saying what `key` expects, with an example.
fn lit_str(value: &Expr, key: &str, example: &str, errors: &mut Errors) -> Option<LitStr> {
    if let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = value
    {
        return Some(lit.clone());
    }
    errors.at(
        value,
        format!("`{key}` takes a string literal, like `{key} = {example}`"),
    );
    None
}

fn non_empty_str(value: &Expr, key: &str, errors: &mut Errors) -> Option<LitStr> {
    let lit = lit_str(value, key, "\"…\"", errors)?;
    if lit.value().trim().is_empty() {
        errors.at(&lit, format!("`{key}` cannot be empty"));
        return None;
    }
    Some(lit)
}

/// Longest job name, in bytes; must equal `jobq_runtime::MAX_JOB_NAME_LEN`
/// (a periodic job's key `cron:{name}:{tick}` must fit in 255 characters).
const MAX_NAME_LEN: usize = 200;

/// A job name of at most [`MAX_NAME_LEN`] bytes, the error spanned on `at`.
fn check_name_len(name: &str, at: &impl ToTokens, errors: &mut Errors) {
    if name.len() > MAX_NAME_LEN {
        errors.at(
            at,
            format!(
                "the job name is {} bytes long; it must be at most {MAX_NAME_LEN} bytes (room for a periodic job's key `cron:{{name}}:{{tick}}` in 255 characters): pin a shorter one with `name = \"…\"`",
                name.len()
            ),
        );
    }
}

/// `priority = 5` or `priority = -5`, within `i16`.
fn priority(value: &Expr, errors: &mut Errors) -> Option<i16> {
    let (negative, literal) = match value {
        Expr::Unary(unary) if matches!(unary.op, UnOp::Neg(_)) => (true, &*unary.expr),
        _ => (false, value),
    };
    let Expr::Lit(ExprLit {
        lit: Lit::Int(lit), ..
    }) = literal
    else {
        return integer_expected(value, "priority", "-5", errors);
    };
    let parsed = lit
        .base10_parse::<i64>()
        .ok()
        .map(|n| if negative { -n } else { n })
        .and_then(|n| i16::try_from(n).ok());
    if parsed.is_none() {
        errors.at(
            value,
            format!(
                "`priority` must fit in an `i16` ({}..={}); smaller runs first",
                i16::MIN,
                i16::MAX
            ),
        );
    }
    parsed
}

/// `max_attempts = 8`: a `u32` of at least 1.
fn max_attempts(value: &Expr, errors: &mut Errors) -> Option<u32> {
    let Expr::Lit(ExprLit {
        lit: Lit::Int(lit), ..
    }) = value
    else {
        return integer_expected(value, "max_attempts", "8", errors);
    };
    match lit.base10_parse::<u32>() {
        Ok(0) => errors.at(
            lit,
            "`max_attempts` must be at least 1: it counts the first attempt too",
        ),
        Ok(n) => return Some(n),
        Err(_) => errors.at(lit, "`max_attempts` must fit in a `u32`"),
    }
    None
}

/// The largest `concurrency`; must equal `jobq_core::MAX_KEY_CONCURRENCY`
/// (tests/ui/pass/concurrency.rs checks it).
const MAX_KEY_CONCURRENCY: u32 = 10_000;

/// `concurrency = 5`: the literal, and its value if it is 1 to
/// [`MAX_KEY_CONCURRENCY`].
fn concurrency(value: &Expr, errors: &mut Errors) -> Option<(LitInt, Option<u32>)> {
    let Expr::Lit(ExprLit {
        lit: Lit::Int(lit), ..
    }) = value
    else {
        return integer_expected(value, "concurrency", "5", errors);
    };
    let limit = match lit.base10_parse::<u64>() {
        Ok(0) => {
            errors.at(
                lit,
                "`concurrency` must be at least 1: it is how many jobs of one concurrency key may run at once",
            );
            None
        }
        Ok(n) if n <= u64::from(MAX_KEY_CONCURRENCY) => u32::try_from(n).ok(),
        _ => {
            errors.at(
                lit,
                format!(
                    "`concurrency` must be at most {MAX_KEY_CONCURRENCY} (`MAX_KEY_CONCURRENCY`); for no per-key limit, leave out `concurrency_key` and `concurrency`"
                ),
            );
            None
        }
    };
    Some((lit.clone(), limit))
}

fn integer_expected<T>(value: &Expr, key: &str, example: &str, errors: &mut Errors) -> Option<T> {
    errors.at(
        value,
        format!("`{key}` takes an integer literal, like `{key} = {example}`"),
    );
    None
}

/// A humantime duration such as `"30s"` or `"1h 30m"`, checked now rather than at run time.
fn duration(lit: &LitStr, errors: &mut Errors) -> Option<Duration> {
    match humantime::parse_duration(&lit.value()) {
        Ok(duration) => Some(duration),
        Err(error) => {
            errors.at(
                lit,
                format!(
                    "invalid duration {:?}: {error}; write it like \"30s\", \"5m\" or \"1h 30m\"",
                    lit.value()
                ),
            );
            None
        }
    }
}

const BACKOFF_FORMS: &str = "`backoff` takes one of `exponential(\"1s\", \"1h\")` (base, cap), \
                             `fixed(\"5s\")` (delay) or `linear(\"10s\", \"10m\")` (step, cap)";

/// `backoff = exponential("1s", "1h") | fixed("5s") | linear("10s", "10m")`.
fn backoff(value: &Expr, errors: &mut Errors) -> Option<Retry> {
    let Expr::Call(call) = value else {
        errors.at(value, BACKOFF_FORMS);
        return None;
    };
    let form = match &*call.func {
        Expr::Path(path) => path.path.get_ident().map(ToString::to_string),
        _ => None,
    };
    let arity = match form.as_deref() {
        Some("exponential" | "linear") => 2,
        Some("fixed") => 1,
        _ => {
            errors.at(&call.func, BACKOFF_FORMS);
            return None;
        }
    };
    let form = form.unwrap_or_default();
    if call.args.len() != arity {
        errors.at(call, BACKOFF_FORMS);
        return None;
    }
    let mut durations = Vec::with_capacity(arity);
    for arg in &call.args {
        let example = if form == "fixed" { "\"5s\"" } else { "\"1s\"" };
        let lit = lit_str(arg, &format!("{form}(…)"), example, errors);
        durations.push(lit.as_ref().and_then(|lit| duration(lit, errors)));
    }
    let durations: Vec<Duration> = durations.into_iter().collect::<Option<_>>()?;
    let retry = match (form.as_str(), &durations[..]) {
        ("fixed", &[delay]) => return Some(Retry::Fixed(delay)),
        ("exponential", &[base, max]) => {
            if base.is_zero() {
                errors.at(
                    &call.args[0],
                    "the base of `exponential` must be longer than zero",
                );
                return None;
            }
            Retry::Exponential { base, max }
        }
        ("linear", &[step, max]) => Retry::Linear { step, max },
        _ => unreachable!("the arity was checked"),
    };
    if durations[1] < durations[0] {
        errors.at(
            &call.args[1],
            format!(
                "the cap of `{form}` cannot be shorter than its {}",
                if form == "linear" { "step" } else { "base" }
            ),
        );
        return None;
    }
    Some(retry)
}

/// `retry = ["1s", "30s", "5m"]`: an explicit schedule, the last entry repeating.
fn schedule(value: &Expr, errors: &mut Errors) -> Option<Retry> {
    let Expr::Array(array) = value else {
        errors.at(
            value,
            "`retry` takes a list of delays, like `retry = [\"1s\", \"30s\", \"5m\"]`",
        );
        return None;
    };
    if array.elems.is_empty() {
        errors.at(
            array,
            "`retry` needs at least one delay; to retry at once, write `retry = [\"0s\"]`",
        );
        return None;
    }
    let delays: Vec<Option<Duration>> = array
        .elems
        .iter()
        .map(|elem| {
            let lit = lit_str(elem, "retry = [...]", "\"30s\"", errors)?;
            duration(&lit, errors)
        })
        .collect();
    delays
        .into_iter()
        .collect::<Option<_>>()
        .map(Retry::Schedule)
}

/// The most tags and the longest tag; must equal `jobq_core::MAX_TAGS`
/// and `MAX_TAG_LEN` (tests/ui/pass/tags.rs checks them).
const MAX_TAGS: usize = 16;
const MAX_TAG_LEN: usize = 100;

/// `tags = ["…", …]`: string literals, each 1 to [`MAX_TAG_LEN`] bytes
/// without NUL, none twice, at most [`MAX_TAGS`].
fn tags(value: &Expr, errors: &mut Errors) -> Option<Vec<String>> {
    let Expr::Array(array) = value else {
        errors.at(
            value,
            "`tags` takes a list of strings, like `tags = [\"billing\", \"nightly\"]`",
        );
        return None;
    };
    if array.elems.len() > MAX_TAGS {
        errors.at(array, format!("at most {MAX_TAGS} tags (MAX_TAGS)"));
        return None;
    }
    let mut tags: Vec<String> = Vec::new();
    for elem in &array.elems {
        let lit = lit_str(elem, "tags = [...]", "\"billing\"", errors)?;
        let tag = lit.value();
        if tag.is_empty() || tag.len() > MAX_TAG_LEN || tag.contains('\0') {
            errors.at(
                &lit,
                format!("a tag has 1 to {MAX_TAG_LEN} bytes (MAX_TAG_LEN) and no NUL"),
            );
            return None;
        }
        if tags.contains(&tag) {
            errors.at(&lit, format!("tag `{tag}` is given twice"));
            return None;
        }
        tags.push(tag);
    }
    Some(tags)
}

/// `crate = path` or `crate = "path"`.
fn crate_path(value: &Expr, errors: &mut Errors) -> Option<Path> {
    let parsed = match value {
        Expr::Path(path) if path.qself.is_none() => {
            Path::parse_mod_style.parse2(path.path.to_token_stream())
        }
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => lit.parse_with(Path::parse_mod_style),
        _ => Err(syn::Error::new_spanned(value, "")),
    };
    match parsed {
        Ok(path) => Some(path),
        Err(_) => {
            errors.at(
                value,
                "`crate` takes the path of the crate that re-exports jobq-runtime, \
                 like `crate = jobq` or `crate = \"jobq\"`",
            );
            None
        }
    }
}

/// Checks the signature and sorts the parameters into context, states and payload.
fn check_signature(sig: &Signature, errors: &mut Errors) -> Vec<Param> {
    if sig.asyncness.is_none() {
        errors.at(
            sig.fn_token,
            "`#[job]` needs an `async fn`: write `async fn` here",
        );
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.at(unsafety, "a `#[job]` fn cannot be `unsafe`");
    }
    if let Some(abi) = &sig.abi {
        errors.at(abi, "a `#[job]` fn cannot have an `extern` ABI");
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        let generics = &sig.generics;
        let where_clause = &sig.generics.where_clause;
        errors.at(
            quote!(#generics #where_clause),
            "a `#[job]` fn cannot be generic: its payload is stored as JSON and found again by \
             job name, so every parameter needs a concrete type",
        );
    }
    if let Some(variadic) = &sig.variadic {
        errors.at(variadic, "a `#[job]` fn cannot be variadic");
    }

    let mut params = Vec::with_capacity(sig.inputs.len());
    let mut context: Option<&Type> = None;
    for input in &sig.inputs {
        let typed = match input {
            FnArg::Receiver(receiver) => {
                errors.at(
                    receiver,
                    "a `#[job]` fn cannot take `self`: put `#[job]` on a free `async fn`",
                );
                continue;
            }
            FnArg::Typed(typed) => typed,
        };
        let ty = &*typed.ty;
        if let Some(by_ref) = context_param(ty, errors) {
            if let Some(first) = context {
                errors.at(
                    ty,
                    format!(
                        "a `#[job]` fn takes at most one `JobContext`; `{}` is already one",
                        first.to_token_stream()
                    ),
                );
            } else {
                context = Some(ty);
            }
            params.push(Param::Context { by_ref });
        } else if let Some(state) = state_param(ty, errors) {
            params.push(Param::State { ty: state });
        } else if let Some(ident) = payload_ident(&typed.pat, errors) {
            check_owned(ty, &ident, errors);
            params.push(Param::Payload {
                ident,
                ty: ty.clone(),
            });
        }
    }
    params
}

/// The last path segment of a type, if it is a plain path.
fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(TypePath { qself: None, path }) => path.segments.last(),
        Type::Group(group) => last_segment(&group.elem),
        Type::Paren(paren) => last_segment(&paren.elem),
        _ => None,
    }
}

fn is_named(ty: &Type, name: &str) -> bool {
    last_segment(ty).is_some_and(|segment| segment.ident == name)
}

/// `Some(by_ref)` if `ty` is `JobContext` or `&JobContext`.
fn context_param(ty: &Type, errors: &mut Errors) -> Option<bool> {
    if is_named(ty, "JobContext") {
        return Some(false);
    }
    let Type::Reference(reference) = ty else {
        return None;
    };
    if !is_named(&reference.elem, "JobContext") {
        return None;
    }
    if let Some(mutability) = &reference.mutability {
        errors.at(
            mutability,
            "take `JobContext` or `&JobContext`, not `&mut JobContext`",
        );
    }
    Some(true)
}

/// `Some(T)` if `ty` is `State<T>`.
fn state_param(ty: &Type, errors: &mut Errors) -> Option<Type> {
    if let Type::Reference(reference) = ty {
        if is_named(&reference.elem, "State") {
            errors.at(
                ty,
                "take `State<T>` by value: it is a cheap handle (an `Arc`) to the worker's value",
            );
            return Some(reference.elem.as_ref().clone());
        }
        return None;
    }
    let segment = last_segment(ty).filter(|segment| segment.ident == "State")?;
    if let PathArguments::AngleBracketed(args) = &segment.arguments {
        if let [GenericArgument::Type(inner)] = args.args.iter().collect::<Vec<_>>()[..] {
            return Some(inner.clone());
        }
    }
    errors.at(
        ty,
        "`State` takes exactly one type: `State<T>`, where the worker was given a `T`",
    );
    Some(ty.clone())
}

/// The field name of a payload parameter: its pattern must be a plain `name`.
fn payload_ident(pat: &Pat, errors: &mut Errors) -> Option<Ident> {
    if let Pat::Ident(pat_ident) = pat {
        if pat_ident.by_ref.is_none() && pat_ident.subpat.is_none() {
            return Some(pat_ident.ident.clone());
        }
    }
    errors.at(
        pat,
        "a payload parameter of a `#[job]` fn must be `name: Type`: its name becomes a field \
         of the payload struct, so patterns cannot be used here",
    );
    None
}

/// Payload fields are decoded from JSON into owned values: no borrows, no `impl Trait`.
fn check_owned(ty: &Type, field: &Ident, errors: &mut Errors) {
    struct Visitor<'e> {
        field: &'e Ident,
        errors: &'e mut Errors,
    }
    impl<'ast> syn::visit::Visit<'ast> for Visitor<'_> {
        fn visit_type_reference(&mut self, reference: &'ast syn::TypeReference) {
            self.errors.at(
                reference,
                format!(
                    "payload field `{}` cannot borrow: the payload is decoded from JSON into \
                     owned values, so use an owned type (`String` rather than `&str`, `Vec<T>` \
                     rather than `&[T]`)",
                    self.field
                ),
            );
        }
        fn visit_type_impl_trait(&mut self, ty: &'ast syn::TypeImplTrait) {
            self.errors.at(
                ty,
                format!(
                    "payload field `{}` cannot be `impl Trait`: its type must be concrete",
                    self.field
                ),
            );
        }
        fn visit_lifetime(&mut self, lifetime: &'ast syn::Lifetime) {
            if lifetime.ident != "static" {
                self.errors.at(
                    lifetime,
                    format!(
                        "payload field `{}` cannot borrow: the payload is decoded from JSON into \
                         owned values, so its type cannot have a lifetime other than `'static`",
                        self.field
                    ),
                );
            }
        }
    }
    syn::visit::Visit::visit_type(&mut Visitor { field, errors }, ty);
}

/// Parses `key = "welcome:{user_id}"` (or `concurrency_key = "…"`) against
/// the payload fields; `what` names the template in errors (`"key"`,
/// `"concurrency key"`).
fn parse_key_template(
    lit: &LitStr,
    what: &str,
    fields: &[&Ident],
    errors: &mut Errors,
) -> Option<KeyTemplate> {
    let template = lit.value();
    let mut format = String::with_capacity(template.len());
    let mut args = Vec::new();
    let mut ok = true;
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                format.push_str("{{");
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                format.push_str("}}");
            }
            '{' => {
                let mut placeholder = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    placeholder.push(c);
                }
                if !closed {
                    errors.at(
                        lit,
                        format!(
                            "unclosed `{{` in the {what} template; write `{{{{` for a literal brace"
                        ),
                    );
                    return None;
                }
                let (name, spec) = match placeholder.split_once(':') {
                    Some((name, spec)) => (name.trim(), Some(spec)),
                    None => (placeholder.trim(), None),
                };
                match fields.iter().find(|field| field.unraw() == name) {
                    Some(field) => {
                        args.push((*field).clone());
                        format.push('{');
                        if let Some(spec) = spec {
                            format.push(':');
                            format.push_str(spec);
                        }
                        format.push('}');
                    }
                    None => {
                        ok = false;
                        errors.at(lit, missing_field(name, what, fields));
                    }
                }
            }
            '}' => {
                errors.at(
                    lit,
                    format!(
                        "unmatched `}}` in the {what} template; write `}}}}` for a literal brace"
                    ),
                );
                return None;
            }
            c => format.push(c),
        }
    }
    ok.then(|| KeyTemplate {
        format: LitStr::new(&format, lit.span()),
        args,
        template,
    })
}

fn missing_field(name: &str, what: &str, fields: &[&Ident]) -> String {
    let placeholder = format!("{{{name}}}");
    let available = if fields.is_empty() {
        "this job has no payload fields".to_owned()
    } else {
        let list = fields
            .iter()
            .map(|field| format!("`{}`", field.unraw()))
            .collect::<Vec<_>>()
            .join(", ");
        format!("the payload fields are {list}")
    };
    if name.is_empty() {
        format!("`{{}}` in the {what} template needs a payload field name; {available}")
    } else {
        format!("`{placeholder}` in the {what} template names no payload field; {available}")
    }
}

/// `send_welcome` → `SendWelcome`.
fn pascal_case(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    for word in snake.split('_').filter(|word| !word.is_empty()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "Job");
    }
    out
}

/// The fn's `#[doc]` attributes, copied onto the payload struct.
pub(crate) fn docs(attrs: &[Attribute]) -> impl Iterator<Item = &Attribute> {
    attrs.iter().filter(|attr| attr.path().is_ident("doc"))
}

/// The fn's `#[cfg]` attributes, copied onto every generated item.
pub(crate) fn cfgs(attrs: &[Attribute]) -> impl Iterator<Item = &Attribute> {
    attrs.iter().filter(|attr| attr.path().is_ident("cfg"))
}

/// A local of the generated code: `__jobq_{name}`, mixed-site, so user locals never see it.
pub(crate) fn local(name: &str) -> Ident {
    format_ident!("__jobq_{}", name, span = Span::mixed_site())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pascal_case_joins_words() {
        assert_eq!(pascal_case("send_welcome"), "SendWelcome");
        assert_eq!(pascal_case("_private_job"), "PrivateJob");
        assert_eq!(pascal_case("send2fa_code"), "Send2faCode");
        assert_eq!(pascal_case("Already"), "Already");
    }

    #[test]
    fn unknown_keys_suggest_the_closest_known_key() {
        assert!(unknown_key("max_attempt").ends_with("(did you mean `max_attempts`?)"));
        assert!(!unknown_key("colour").contains("did you mean"));
    }

    #[test]
    fn a_key_template_becomes_positional_format_args() {
        let user_id = Ident::new("user_id", Span::call_site());
        let lit = LitStr::new("{{welcome}}:{user_id}:{user_id:>8}", Span::call_site());
        let mut errors = Errors::default();
        let key = parse_key_template(&lit, "key", &[&user_id], &mut errors).unwrap();
        assert!(errors.finish().is_ok());
        assert_eq!(key.format.value(), "{{welcome}}:{}:{:>8}");
        assert_eq!(key.args, [user_id.clone(), user_id]);
    }
}
