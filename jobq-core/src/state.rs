//! Values a worker hands to `State<T>` parameters.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A shared value injected into a job handler by the worker (`.state(value)`).
///
/// ```
/// use jobq_core::{State, States};
///
/// let mut states = States::default();
/// states.insert(String::from("smtp://localhost"));
/// let s: State<String> = states.get().unwrap();
/// assert_eq!(s.as_str(), "smtp://localhost");
/// ```
pub struct State<T: ?Sized>(Arc<T>);

impl<T: ?Sized> State<T> {
    /// The shared value.
    pub fn into_inner(self) -> Arc<T> {
        self.0
    }
}

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T: ?Sized> Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for State<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("State").field(&&*self.0).finish()
    }
}

/// The set of values a worker was given, keyed by type.
#[derive(Clone, Default)]
pub struct States {
    map: HashMap<TypeId, (Arc<dyn Any + Send + Sync>, &'static str)>,
}

impl States {
    /// Adds a value; a second value of the same type replaces the first.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.map.insert(
            TypeId::of::<T>(),
            (Arc::new(value), std::any::type_name::<T>()),
        );
    }

    /// The value of type `T`, if one was given.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<State<T>> {
        let any = Arc::clone(&self.map.get(&TypeId::of::<T>())?.0);
        any.downcast::<T>().ok().map(State)
    }

    /// Whether a value of this type was given.
    pub fn contains(&self, requirement: &StateRequirement) -> bool {
        self.map.contains_key(&(requirement.type_id)())
    }

    /// The types of the values given, as [`type_name_as_written`] prints
    /// them, sorted.
    ///
    /// ```
    /// use jobq_core::States;
    ///
    /// let mut states = States::default();
    /// states.insert(std::sync::Arc::new(String::new()));
    /// states.insert(7_u32);
    /// assert_eq!(states.type_names(), ["std::sync::Arc<String>", "u32"]);
    /// ```
    pub fn type_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .map
            .values()
            .map(|(_, name)| type_name_as_written(name))
            .collect();
        names.sort();
        names
    }
}

/// `std::any::type_name`'s text the way a user writes the type: the
/// `alloc::` and `core::` paths std re-exports as `std::` (`alloc::sync::Arc`
/// is `std::sync::Arc`), and the prelude's `String`, `Vec`, `Box`, `Option`
/// and `Result` without a path.
///
/// ```
/// use jobq_core::type_name_as_written;
///
/// assert_eq!(
///     type_name_as_written("alloc::sync::Arc<alloc::vec::Vec<core::option::Option<u8>>>"),
///     "std::sync::Arc<Vec<Option<u8>>>"
/// );
/// ```
pub fn type_name_as_written(name: &str) -> String {
    let mut text = name.to_owned();
    for (from, to) in [
        ("alloc::", "std::"),
        ("core::", "std::"),
        ("std::string::String", "String"),
        ("std::vec::Vec", "Vec"),
        ("std::boxed::Box", "Box"),
        ("std::option::Option", "Option"),
        ("std::result::Result", "Result"),
    ] {
        text = replace_paths(&text, from, to);
    }
    text
}

/// `text` with each `from` that starts a path (at the beginning or after a
/// character no path has, such as `<`, `,`, ` ` or `&`) and ends one or a
/// segment (`from` ending in `::`, or followed by a character no name has)
/// replaced by `to`.
fn replace_paths(text: &str, from: &str, to: &str) -> String {
    let in_path = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let (before, tail) = rest.split_at(at);
        out.push_str(before);
        let after = &tail[from.len()..];
        let starts = out.chars().next_back().is_none_or(|c| !in_path(c));
        let ends = from.ends_with("::") || after.chars().next().is_none_or(|c| !in_path(c));
        out.push_str(if starts && ends { to } else { from });
        rest = after;
    }
    out.push_str(rest);
    out
}

impl fmt::Debug for States {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("States")
            .field("len", &self.map.len())
            .finish()
    }
}

/// A `State<T>` a handler needs, checked when the worker is built.
#[derive(Clone, Copy)]
pub struct StateRequirement {
    /// `TypeId::of::<T>`.
    pub type_id: fn() -> TypeId,
    /// `std::any::type_name::<T>()`.
    pub type_name: &'static str,
}

impl StateRequirement {
    /// The requirement for `State<T>`.
    pub fn of<T: Send + Sync + 'static>() -> Self {
        Self {
            type_id: TypeId::of::<T>,
            type_name: std::any::type_name::<T>(),
        }
    }
}

impl fmt::Debug for StateRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "State<{}>", type_name_as_written(self.type_name))
    }
}
