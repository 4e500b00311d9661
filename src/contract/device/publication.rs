//! A publication's device side (what [`Device::publish`] does before it
//! makes the runner): the pins a publication holds until the next one, and
//! the code generations that make the AICore stream stale.

use super::Device;
use crate::contract::code::{Callable, CodeEntry};
use crate::contract::error::{Action, Error, ErrorKind};
use crate::driver::Driver;

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// The work of [`Device::publish`] up to the runner: names checked,
    /// forgotten runs drained, the last publication's pins released, the
    /// new code registered and pinned, the code generation advanced where
    /// the AICore stream may be stale for it.
    ///
    /// `&self`: a caller that did not prove by a borrow that no runner,
    /// token or run is alive (a shared device) proves it at run time first.
    pub(crate) fn register(&self, callables: &[Callable]) -> Result<Vec<CodeEntry>, Error> {
        // Refused before anything happens: `code(name)` must name one callable.
        for (i, c) in callables.iter().enumerate() {
            if callables[..i].iter().any(|p| p.name() == c.name()) {
                return Err(Error::plain(
                    Action::Publish,
                    ErrorKind::DuplicateCallable(c.name().into()),
                ));
            }
        }
        self.drain(None)
            .map_err(|k| Error::plain(Action::Publish, k))?;
        let mut st = self.lock();
        // From here on no code reference of the last publication is valid,
        // whether or not this one succeeds; nor is a graph captured with
        // its code (a shared device's lanes', the only ones a publication
        // can find: a typed capture borrows its runner). The queue is
        // quiet: each is destroyed now.
        st.publications += 1;
        st.graphs.doom_all();
        self.destroy_doomed(&mut st);
        // The last publication's runner is gone (the caller's borrow is
        // exclusive, or it proved no token or run alive) and nothing is in
        // flight: its code may go.
        for code in st.pins.take_all() {
            // A refused release keeps the pin, to be retried at the next
            // publication and at close (meanwhile the code stays resident).
            if self.driver.release_code(code).is_err() {
                st.pins.pin(code);
            }
        }
        let mut entries = Vec::with_capacity(callables.len());
        for c in callables {
            let r = self.driver.register_code(c.code()).map_err(|e| {
                let kind = match e.kind() {
                    crate::driver::DriverErrorKind::CodeMemoryFull { capacity } => {
                        ErrorKind::CodeDoesNotFit {
                            capacity: *capacity,
                        }
                    }
                    _ => ErrorKind::from_driver(e),
                };
                Error::plain(Action::Publish, kind)
            })?;
            st.pins.pin(r.handle);
            // Code uploaded now may be stale in the AICore stream's
            // instruction cache: a new code generation starts at once,
            // before a later registration can fail and return early. (Code
            // anyone else uploaded after the stream was created — reached
            // here by a dedup hit, or later — moves the driver's code epoch
            // instead, which the next launch checks.)
            if r.published {
                st.streams.new_generation();
                st.stats.generations += 1;
            }
            entries.push(CodeEntry {
                name: c.name().to_owned(),
                handle: r.handle,
            });
        }
        drop(st);
        Ok(entries)
    }
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// The current publication (see `CodeRef::publication`).
    pub(crate) fn publication(&self) -> u64 {
        self.lock().publications
    }
}
