//! What a forward collects beside its output, by kind: each sublayer that has something to
//! report (attention's softmax diagnostics, QK-clip's per-head logit maxima, TaperNorm's
//! calibration, a MoE layer's routing) appends an entry under its kind's name, and only the
//! kinds the caller switched on are kept. A new scheme's record is a new [`RecordKind`] in
//! its own file; no struct between the sublayer and the caller changes.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;

/// A kind of record: its name and the type of one entry.
pub struct RecordKind<T> {
    pub name: &'static str,
    entry: PhantomData<fn() -> T>,
}

impl<T> Clone for RecordKind<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for RecordKind<T> {}

impl<T: 'static> RecordKind<T> {
    pub const fn named(name: &'static str) -> Self {
        Self { name, entry: PhantomData }
    }

    /// The kind's key: two kinds are one only when both name and entry type agree.
    fn key(self) -> Key {
        (self.name, TypeId::of::<T>())
    }
}

/// The entries of the switched-on kinds, in the order the forward appended them.
#[derive(Default)]
pub struct Records {
    lists: RefCell<BTreeMap<Key, Vec<Box<dyn Any>>>>,
}

/// A kind's name and entry type.
type Key = (&'static str, TypeId);

impl Records {
    /// Keeps the entries of `kind` from now on.
    pub fn collect<T: 'static>(&mut self, kind: RecordKind<T>) {
        self.lists.get_mut().entry(kind.key()).or_default();
    }

    /// Whether `kind` is switched on: a sublayer computes an entry only when it is.
    pub fn collects<T: 'static>(&self, kind: RecordKind<T>) -> bool {
        self.lists.borrow().contains_key(&kind.key())
    }

    /// Appends `entry` when `kind` is switched on; drops it otherwise.
    pub fn push<T: 'static>(&self, kind: RecordKind<T>, entry: T) {
        if let Some(list) = self.lists.borrow_mut().get_mut(&kind.key()) {
            list.push(Box::new(entry));
        }
    }

    /// Changes the last entry of `kind`, when it is switched on and has one.
    pub fn edit_last<T: 'static>(&self, kind: RecordKind<T>, edit: impl FnOnce(&mut T)) {
        let mut lists = self.lists.borrow_mut();
        if let Some(last) = lists.get_mut(&kind.key()).and_then(|l| l.last_mut()).and_then(|e| e.downcast_mut::<T>()) {
            edit(last);
        }
    }

    /// The entries of `kind`, taken out (empty when it was not switched on).
    pub fn take<T: 'static>(&self, kind: RecordKind<T>) -> Vec<T> {
        let list = self.lists.borrow_mut().get_mut(&kind.key()).map(std::mem::take).unwrap_or_default();
        // Every entry under this key was pushed as a `T`.
        list.into_iter().filter_map(|e| e.downcast::<T>().ok()).map(|e| *e).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COUNT: RecordKind<usize> = RecordKind::named("count");
    const WORD: RecordKind<&'static str> = RecordKind::named("word");

    #[test]
    fn only_switched_on_kinds_keep_their_entries_in_order() {
        let mut r = Records::default();
        r.collect(COUNT);
        assert!(r.collects(COUNT) && !r.collects(WORD));
        r.push(COUNT, 3);
        r.push(WORD, "dropped");
        r.push(COUNT, 1);
        r.edit_last(COUNT, |c| *c += 4);
        r.edit_last(WORD, |w| *w = "not kept");
        assert_eq!(r.take(COUNT), vec![3, 5]);
        assert_eq!(r.take(COUNT), Vec::<usize>::new(), "taken once");
        assert!(r.take(WORD).is_empty());
    }
}
