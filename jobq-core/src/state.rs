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
    map: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl States {
    /// Adds a value; a second value of the same type replaces the first.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.map.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T`, if one was given.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<State<T>> {
        let any = Arc::clone(self.map.get(&TypeId::of::<T>())?);
        any.downcast::<T>().ok().map(State)
    }

    /// Whether a value of this type was given.
    pub fn contains(&self, requirement: &StateRequirement) -> bool {
        self.map.contains_key(&(requirement.type_id)())
    }
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
        write!(f, "State<{}>", self.type_name)
    }
}
