//! The statements of listing and bulk actions, built from a [`JobFilter`].
//!
//! Each backend declares, in its `sql.rs`, one [`Filtered`]: the constant
//! pieces of every condition a filter can set and the heads and tails of its
//! statements. [`Filtered::statement`] joins the pieces of the conditions a
//! filter sets, each followed by its placeholder, and collects the values to
//! bind in the same order: no value is ever formatted into SQL, and the
//! statement text depends only on which fields are set (so the driver's
//! statement cache holds a handful of shapes, not one per value).

use chrono::{DateTime, Utc};

use crate::ops::{JobFilter, Order};
use crate::types::JobStatus;

/// Ids one batch of `retry_where` / `cancel_where` changes at most: each
/// batch is a short transaction, so no lock is held for long.
pub(crate) const BULK_BATCH: usize = 500;

/// Ids one page of a bulk action reads at most (8 bytes each), where the
/// backend sorts a page of a filter its indexes serve in another order
/// (see [`Filtered::ids_page`]): the ids it acts on are read, without
/// locks, page by page in id order, and each page is then acted on in
/// batches of [`BULK_BATCH`].
#[cfg_attr(not(any(feature = "mysql", feature = "sqlite")), allow(dead_code))]
pub(crate) const BULK_PAGE: u32 = 100_000;

/// Which statuses a statement matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Statuses {
    /// Every status.
    Any,
    /// One status.
    One(JobStatus),
    /// `pending` or `processing` (what a cancel applies to).
    Cancellable,
    /// `failed` or `cancelled` (what a retry applies to).
    Retryable,
}

impl Statuses {
    /// The statuses of `action` a filter on `wanted` leaves: `None` when
    /// they have none in common (the action changes nothing).
    pub(crate) fn of_action(action: Self, wanted: Option<JobStatus>) -> Option<Self> {
        let applies = |s: JobStatus| match action {
            Self::Cancellable => matches!(s, JobStatus::Pending | JobStatus::Processing),
            Self::Retryable => matches!(s, JobStatus::Failed | JobStatus::Cancelled),
            Self::Any => true,
            Self::One(one) => one == s,
        };
        match wanted {
            None => Some(action),
            Some(s) if applies(s) => Some(Self::One(s)),
            Some(_) => None,
        }
    }
}

/// How a backend matches a key prefix byte for byte, never with `LIKE`
/// (whose `%` and `_` would be wildcards).
#[derive(Debug)]
// Each variant serves some backends only.
#[cfg_attr(
    not(all(feature = "mysql", feature = "postgres", feature = "sqlite")),
    allow(dead_code)
)]
pub(crate) enum KeyPieces {
    /// `key >= prefix AND key < next(prefix)`: a range of the unique key
    /// index, exact where the column compares bytes (MySQL's VARBINARY,
    /// SQLite's BINARY collation). [`next_prefix`] has no upper bound
    /// for a prefix of only U+10FFFF; `before` is then left out.
    Range {
        from: &'static str,
        before: &'static str,
    },
    /// A function of the column and the prefix, closed by `close`
    /// (PostgreSQL's `starts_with`: the unique index is in the database's
    /// collation, whose order is not byte order, so no range of it is exact).
    Call {
        open: &'static str,
        close: &'static str,
    },
}

/// The constant pieces of each condition; each is followed by one placeholder.
#[derive(Debug)]
pub(crate) struct Pieces {
    /// `?` (positional) or a prefix numbered from 1 (`$1`, `?1`).
    pub(crate) placeholder: &'static str,
    /// Whether placeholders are numbered.
    pub(crate) numbered: bool,
    pub(crate) queue: &'static str,
    /// No placeholder: one literal per status, in [`JobStatus`] order
    /// (pending, processing, done, failed, cancelled, blocked), so that
    /// PostgreSQL can prove a partial index applies.
    pub(crate) status: [&'static str; 6],
    /// No placeholder: `pending`, `processing` or `blocked`.
    pub(crate) cancellable: &'static str,
    /// No placeholder: `failed` or `cancelled`.
    pub(crate) retryable: &'static str,
    pub(crate) job_name: &'static str,
    /// A tag: its piece, its placeholder, then [`TAG_CLOSE`].
    pub(crate) tag: &'static str,
    pub(crate) key: KeyPieces,
    pub(crate) created_from: &'static str,
    pub(crate) created_before: &'static str,
    /// Keyset paging: `id < ?` (newest first).
    pub(crate) id_below: &'static str,
    /// Keyset paging: `id > ?` (oldest first, and the bulk batches that page).
    pub(crate) id_above: &'static str,
}

/// What closes [`Pieces::tag`]'s subquery.
const TAG_CLOSE: &str = ")";

/// One statement: its head (`SELECT … FROM jobq_jobs`, an index hint and a
/// `WHERE` follow, which the conditions extend with `AND`), and the pieces
/// around its limit's placeholder, if it has one.
#[derive(Debug)]
struct Shape {
    head: &'static str,
    limit: Option<(&'static str, &'static str)>,
}

/// Index hints, for an optimizer whose estimates assume that the rows a
/// filter matches are spread evenly over the ids (MySQL/MariaDB): it then
/// walks the primary key for a page in id order, expecting matches every
/// few rows, when they lie together far along it (the jobs of one status
/// behind a million finished ones, the jobs of a day long ago, of a job
/// name no longer enqueued). Each is ` FORCE INDEX (…)`, placed before the
/// `WHERE`.
#[derive(Debug)]
pub(crate) struct Hints {
    /// A page of one queue and one status: the claim index (every matching
    /// entry, sorted).
    pub(crate) claim: &'static str,
    /// A read of a filter with a job name, and a count or a bulk action's
    /// ids of any filter an index serves: the filter's secondary indexes
    /// (the optimizer takes the best one), never a walk of the primary key
    /// or a scan of the table. A filter with only an enqueue-time bound is
    /// a range of the primary key ([`Window`]) and gets no hint.
    pub(crate) secondary: &'static str,
}

/// A backend's filtered statements.
#[derive(Debug)]
pub(crate) struct Filtered {
    pub(crate) pieces: Pieces,
    /// The head of a page: every column `Jobq::job` reads, `FROM
    /// jobq_jobs`; the page is in id order, newest or oldest first.
    pub(crate) list: &'static str,
    /// The head of a count of the matching rows.
    pub(crate) count: &'static str,
    /// The head of one page of the ids a bulk action acts on, read without
    /// locks; the page is in id order, past the previous page's last id.
    pub(crate) ids: &'static str,
    /// The statements of the search for an enqueue-time bound ([`Window`]).
    pub(crate) window: WindowPieces,
    /// Its index hints, if its optimizer needs them.
    pub(crate) hints: Option<Hints>,
    /// Ids per page. Where a filter's index is in another order than id
    /// (the claim index), each page reads all its matching entries and
    /// sorts them: pages of [`BULK_PAGE`] keep that to a few reads of them
    /// (MySQL, SQLite). PostgreSQL's planner walks the primary key for a
    /// small page and stops once it is full (each page goes on where the
    /// last stopped, so a call reads the table once at most), but takes a
    /// page of 100,000 `failed` rows by a scan of the table.
    pub(crate) ids_page: u32,
}

impl Pieces {
    /// The pieces every backend writes alike, around its placeholders and
    /// its key prefix match (a backend overrides any other with `..`).
    pub(crate) const fn new(placeholder: &'static str, numbered: bool, key: KeyPieces) -> Self {
        Self {
            placeholder,
            numbered,
            queue: " AND queue = ",
            status: [
                " AND status = 'pending'",
                " AND status = 'processing'",
                " AND status = 'done'",
                " AND status = 'failed'",
                " AND status = 'cancelled'",
                " AND status = 'blocked'",
            ],
            cancellable: " AND status IN ('pending', 'processing', 'blocked')",
            retryable: " AND status IN ('failed', 'cancelled')",
            job_name: " AND job_name = ",
            tag: " AND id IN (SELECT job_id FROM jobq_job_tags WHERE tag = ",
            key,
            created_from: " AND created_at >= ",
            created_before: " AND created_at < ",
            id_below: " AND id < ",
            id_above: " AND id > ",
        }
    }
}

/// The statements of [`Window`]'s search.
#[derive(Debug)]
pub(crate) struct WindowPieces {
    /// The id of the newest row (one row of the primary key).
    pub(crate) last_id: &'static str,
    /// One probe, around the id's and the time's placeholders (each after
    /// its piece): the id of the first row at or past an id, if it was
    /// enqueued at or after a time, else no row.
    pub(crate) probe: [&'static str; 3],
}

/// Which of a backend's filtered statements to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A page, that way.
    List(Order),
    /// A count.
    Count,
    /// One page of the ids `retry_where` acts on.
    Retry,
    /// One page of the ids `cancel_where` acts on.
    Cancel,
}

/// A value to bind, in the backend's type for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    /// Text.
    Text(String),
    /// An integer (an id, a limit).
    Int(i64),
    /// A point in time (`created_at` bounds).
    Time(DateTime<Utc>),
}

/// A filter as a store applies it: the validated [`JobFilter`], the
/// statuses left after the action's own, where keyset paging starts, and
/// the ids its enqueue-time bounds lie between.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Where<'a> {
    pub(crate) filter: &'a JobFilter,
    pub(crate) statuses: Statuses,
    /// `(direction, id)`: only ids past `id` that way.
    pub(crate) after: Option<(Order, i64)>,
    /// The ids of the filter's enqueue-time bounds (see [`Window`]).
    pub(crate) window: Window,
}

impl<'a> Where<'a> {
    /// Every job `filter` matches, from the start.
    pub(crate) fn new(filter: &'a JobFilter) -> Self {
        Self {
            filter,
            statuses: filter.status.map_or(Statuses::Any, Statuses::One),
            after: None,
            window: Window::default(),
        }
    }
}

/// The range of ids an enqueue-time filter reads: ids are handed out in
/// the order jobs are enqueued, so the jobs enqueued in `[from, before)`
/// lie between the first id enqueued at or after `from` and the first
/// enqueued at or after `before`. Each bound is found by a binary search
/// of the primary key ([`Filtered::probe`], about 20 point reads per
/// million ids), so a time filter reads a range of the primary key: no
/// index by enqueue time is written at every enqueue. The time condition
/// is applied as well, so every job listed was enqueued in the window; a
/// job whose `created_at` is out of id order (enqueued by a host whose
/// clock was behind another's) may be left out near a bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Window {
    /// Only ids at or past this.
    pub(crate) from: Option<i64>,
    /// Only ids before this.
    pub(crate) before: Option<i64>,
}

impl Window {
    /// Finds the first id of the rows enqueued at or after `t`, among the
    /// ids `[lo, hi)` (`hi` past the last id): `None` if none was,
    /// assuming `created_at` grows with the id. `probe(id, t)` is the id of
    /// the first row at or past `id` if that row was enqueued at or after
    /// `t`, else `None`.
    pub(crate) async fn first_enqueued_at<E, P>(
        t: DateTime<Utc>,
        mut lo: i64,
        mut hi: i64,
        mut probe: impl FnMut(i64, DateTime<Utc>) -> P,
    ) -> Result<Option<i64>, E>
    where
        P: Future<Output = Result<Option<i64>, E>>,
    {
        let mut found = None;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match probe(mid, t).await? {
                // No row in [mid, id): the answer is `id` or below `mid`.
                Some(id) => {
                    found = Some(id);
                    hi = mid;
                }
                // The first row past `mid` was enqueued before `t` (or
                // there is none): the answer is past `mid`.
                None => lo = mid + 1,
            }
        }
        Ok(found)
    }
}

/// A statement and its values, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Statement {
    pub(crate) sql: String,
    pub(crate) binds: Vec<Bind>,
    numbered: bool,
    placeholder: &'static str,
    next_param: usize,
}

impl Filtered {
    /// The `kind` statement for `w`, with `limit` bound to its limit (if it has one).
    pub(crate) fn statement(&self, kind: Kind, w: &Where<'_>, limit: i64) -> Statement {
        let page = |order| Shape {
            head: self.list,
            limit: Some((
                match order {
                    Order::NewestFirst => " ORDER BY id DESC LIMIT ",
                    Order::OldestFirst => " ORDER BY id LIMIT ",
                },
                "",
            )),
        };
        let shape = match kind {
            Kind::List(order) => page(order),
            Kind::Count => Shape {
                head: self.count,
                limit: None,
            },
            Kind::Retry | Kind::Cancel => Shape {
                head: self.ids,
                limit: Some((" ORDER BY id LIMIT ", "")),
            },
        };
        let p = &self.pieces;
        let mut s = self.empty(&format!("{}{} WHERE TRUE", shape.head, self.hint(kind, w)));
        let f = w.filter;
        if let Some(queue) = &f.queue {
            s.push(p.queue, Bind::Text(queue.clone()));
        }
        s.sql.push_str(self.guard(w.statuses));
        if let Some(name) = &f.job_name {
            s.push(p.job_name, Bind::Text(name.clone()));
        }
        if let Some(tag) = &f.tag {
            s.push(p.tag, Bind::Text(tag.clone()));
            s.sql.push_str(TAG_CLOSE);
        }
        if let Some(prefix) = &f.key_prefix {
            match p.key {
                KeyPieces::Range { from, before } => {
                    s.push(from, Bind::Text(prefix.clone()));
                    if let Some(next) = next_prefix(prefix) {
                        s.push(before, Bind::Text(next));
                    }
                }
                KeyPieces::Call { open, close } => {
                    s.push(open, Bind::Text(prefix.clone()));
                    s.sql.push_str(close);
                }
            }
        }
        if let Some(from) = f.created_from {
            s.push(p.created_from, Bind::Time(storable(from)));
        }
        if let Some(before) = f.created_before {
            s.push(p.created_before, Bind::Time(storable(before)));
        }
        if let Some(from) = w.window.from {
            s.push(p.id_above, Bind::Int(from.saturating_sub(1)));
        }
        if let Some(before) = w.window.before {
            s.push(p.id_below, Bind::Int(before));
        }
        match w.after {
            Some((Order::NewestFirst, id)) => s.push(p.id_below, Bind::Int(id)),
            Some((Order::OldestFirst, id)) => s.push(p.id_above, Bind::Int(id)),
            None => {}
        }
        if let Some((open, close)) = shape.limit {
            s.push(open, Bind::Int(limit));
            s.sql.push_str(close);
        }
        s
    }
}

impl Filtered {
    /// One probe of [`Window::first_enqueued_at`]: the id of the first row
    /// at or past `id` if it was enqueued at or after `t`, else no row (a
    /// lookup of the primary key and one row).
    pub(crate) fn probe(&self, id: i64, t: DateTime<Utc>) -> Statement {
        let [head, id_piece, time_piece] = self.window.probe;
        let mut s = self.empty(head);
        s.push(id_piece, Bind::Int(id));
        s.push(time_piece, Bind::Time(storable(t)));
        s
    }

    /// The id of the newest row, if any (one row of the primary key).
    pub(crate) fn last_id(&self) -> Statement {
        self.empty(self.window.last_id)
    }

    /// `sql`, to which the backend's placeholders are appended.
    fn empty(&self, sql: &str) -> Statement {
        Statement {
            sql: sql.to_owned(),
            binds: Vec::new(),
            numbered: self.pieces.numbered,
            placeholder: self.pieces.placeholder,
            next_param: 1,
        }
    }

    /// The index hint of the `kind` statement for `w` (see [`Hints`]), or
    /// none.
    fn hint(&self, kind: Kind, w: &Where<'_>) -> &'static str {
        let Some(hints) = &self.hints else {
            return "";
        };
        let f = w.filter;
        if f.tag.is_some() {
            // The tags' index first, each job by its primary key: an
            // index of `jobq_jobs` forced would rule that out.
            return "";
        }
        let spread = f.job_name.is_some();
        let indexed = spread || f.queue.is_some() || f.key_prefix.is_some();
        let reads_every_match = matches!(kind, Kind::Count | Kind::Retry | Kind::Cancel);
        if spread || (reads_every_match && indexed) {
            hints.secondary
        } else if matches!(kind, Kind::List(_))
            && f.queue.is_some()
            && matches!(w.statuses, Statuses::One(_))
        {
            hints.claim
        } else {
            ""
        }
    }

    /// The condition on `statuses` (empty for any status), ` AND …`: the
    /// guard a bulk action's batch re-checks on the rows it locks.
    pub(crate) fn guard(&self, statuses: Statuses) -> &'static str {
        let p = &self.pieces;
        match statuses {
            Statuses::Any => "",
            Statuses::One(status) => p.status[status_index(status)],
            Statuses::Cancellable => p.cancellable,
            Statuses::Retryable => p.retryable,
        }
    }
}

impl Statement {
    /// A constant statement with its values (`?` placeholders, or numbered ones).
    #[cfg_attr(not(any(feature = "mysql", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn fixed(sql: &str, binds: Vec<Bind>) -> Self {
        Self {
            sql: sql.to_owned(),
            next_param: binds.len() + 1,
            binds,
            numbered: false,
            placeholder: "",
        }
    }

    /// Appends `piece`, its placeholder, and `bind` to bind there.
    fn push(&mut self, piece: &str, bind: Bind) {
        self.sql.push_str(piece);
        self.sql.push_str(self.placeholder);
        if self.numbered {
            self.sql.push_str(&self.next_param.to_string());
        }
        self.next_param += 1;
        self.binds.push(bind);
    }
}

/// `t` clamped to years 1000 to 9999, which every backend's time column
/// holds (MySQL's DATETIME holds no more): every stored `created_at` lies
/// within, so a bound beyond keeps its meaning.
fn storable(t: DateTime<Utc>) -> DateTime<Utc> {
    let year = |y| {
        chrono::NaiveDate::from_ymd_opt(y, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| t.and_utc())
    };
    match (year(1000), year(9999)) {
        (Some(earliest), Some(latest)) => t.clamp(earliest, latest),
        _ => t,
    }
}

/// Index of `status` in [`Pieces::status`].
fn status_index(status: JobStatus) -> usize {
    match status {
        JobStatus::Pending => 0,
        JobStatus::Processing => 1,
        JobStatus::Done => 2,
        JobStatus::Failed => 3,
        JobStatus::Cancelled => 4,
        JobStatus::Blocked => 5,
    }
}

/// The least string greater than every string that starts with `prefix`:
/// its last character replaced by the next one (UTF-8's byte order is code
/// point order, so this is also the next in byte order), dropping trailing
/// U+10FFFF first. `None` if `prefix` is only U+10FFFF: no upper bound.
pub(crate) fn next_prefix(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last {
            '\u{D7FF}' => Some('\u{E000}'),
            c => char::from_u32(u32::from(c) + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The pages of ids a bulk action acts on: each read without locks, in id
/// order, past the last id of the page before (keyset), so that a job is in
/// one page at most however its row changes meanwhile (a row the action
/// changed, and a worker changed back, is behind the next page's start).
#[derive(Debug)]
pub(crate) struct Pages<'a> {
    w: Where<'a>,
    kind: Kind,
    done: bool,
}

impl<'a> Pages<'a> {
    /// The pages of the `kind` (`Retry` or `Cancel`) action for `w`.
    pub(crate) fn new(w: Where<'a>, kind: Kind) -> Self {
        Self {
            w,
            kind,
            done: false,
        }
    }

    /// The statement of the next page, or `None` after the last.
    pub(crate) fn next_statement(&self, filtered: &Filtered) -> Option<Statement> {
        let page = i64::from(filtered.ids_page);
        (!self.done).then(|| filtered.statement(self.kind, &self.w, page))
    }

    /// Notes the ids the page of `filtered` read: a short page was the last.
    pub(crate) fn read(&mut self, filtered: &Filtered, ids: &[i64]) {
        match ids.last() {
            Some(&last) if ids.len() >= filtered.ids_page as usize => {
                self.w.after = Some((Order::OldestFirst, last));
            }
            _ => self.done = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's statements with pages of 3 ids.
    #[cfg(feature = "sqlite")]
    const SMALL_PAGES: Filtered = Filtered {
        ids_page: 3,
        ..crate::store::sqlite::sql::FILTERED
    };

    #[cfg(feature = "sqlite")]
    #[test]
    fn each_page_of_a_bulk_action_starts_past_the_last_id_of_the_one_before() {
        let filter = JobFilter::new().queue("q");
        let w = Where {
            statuses: Statuses::Retryable,
            ..Where::new(&filter)
        };
        let mut pages = Pages::new(w, Kind::Retry);
        let first = pages.next_statement(&SMALL_PAGES).expect("a first page");
        assert!(
            first.sql.ends_with(
                " WHERE TRUE AND queue = ?1 AND status IN ('failed', 'cancelled') ORDER BY id LIMIT ?2"
            ),
            "{}",
            first.sql
        );
        assert_eq!(first.binds, [Bind::Text("q".into()), Bind::Int(3)]);
        pages.read(&SMALL_PAGES, &[4, 9, 12]);
        let second = pages
            .next_statement(&SMALL_PAGES)
            .expect("a full page has a next");
        assert!(
            second.sql.ends_with(" AND id > ?2 ORDER BY id LIMIT ?3"),
            "{}",
            second.sql
        );
        assert_eq!(second.binds[1..], [Bind::Int(12), Bind::Int(3)]);
        pages.read(&SMALL_PAGES, &[13]);
        assert!(
            pages.next_statement(&SMALL_PAGES).is_none(),
            "a short page is the last"
        );
    }

    /// The ids of rows enqueued at `created[i]` (growing), with gaps.
    fn table(n: i64) -> Vec<(i64, DateTime<Utc>)> {
        let start = DateTime::<Utc>::UNIX_EPOCH;
        let mut id = 0;
        (0..n)
            .map(|i| {
                id += 1 + (i * 7919) % 5; // gaps of 0 to 4 ids
                (id, start + chrono::Duration::seconds(i / 3)) // 3 rows a second
            })
            .collect()
    }

    #[test]
    fn the_window_search_finds_the_first_id_enqueued_at_or_after_each_time() {
        for n in [0, 1, 2, 3, 10, 97, 1000] {
            let rows = table(n);
            let past_last = rows.last().map_or(1, |r| r.0 + 1);
            let start = DateTime::<Utc>::UNIX_EPOCH;
            for second in -2..=(n / 3 + 2) {
                let t = start
                    + chrono::Duration::seconds(second)
                    + chrono::Duration::milliseconds(500 * (second % 2));
                let probes = std::cell::Cell::new(0);
                let probe = |id: i64, t: DateTime<Utc>| {
                    probes.set(probes.get() + 1);
                    let first = rows.iter().find(|r| r.0 >= id);
                    let found = first.filter(|r| r.1 >= t).map(|r| r.0);
                    async move { Ok::<_, ()>(found) }
                };
                let found = block_on(Window::first_enqueued_at(t, 0, past_last, probe));
                let expected = rows.iter().find(|r| r.1 >= t).map(|r| r.0);
                assert_eq!(found, Ok(expected), "n={n} t={t}");
                let bound = 2 + (64 - past_last.leading_zeros());
                assert!(
                    probes.get() <= bound,
                    "{} probes for {past_last} ids",
                    probes.get()
                );
            }
        }
    }

    /// Runs a future that never waits.
    fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(future)
    }

    #[test]
    fn the_next_prefix_bounds_exactly_the_strings_that_start_with_it() {
        assert_eq!(next_prefix("abc").as_deref(), Some("abd"));
        assert_eq!(next_prefix("a%").as_deref(), Some("a&"));
        assert_eq!(next_prefix("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(next_prefix("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(next_prefix("\u{10FFFF}\u{10FFFF}"), None);
        assert_eq!(next_prefix("é").as_deref(), Some("ê"));
    }
}
