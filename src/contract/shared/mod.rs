//! [`SharedDevice`]: one device many tasks share — an owned, cloneable,
//! `Send + Sync + 'static` handle to a device's published code and its
//! slots, with the typed contract underneath unchanged.
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | `SharedDevice`: open, publish, code, buffers, health, close, the last drop |
//! | `submit.rs` | `SubmitFuture`: admission in arrival order, a slot awaited when all are busy; `try_submit`, `submit_blocking` |
//! | `ticket.rs` | `Ticket`: one submission's result, awaited or waited for |
//! | `barrier.rs` | `PublishFuture`, `SharedCloseFuture`: every outstanding run settled into its ticket first |
//! | `hub.rs` | what the handle keeps under its lock: the lanes, the arrivals, the settled outcomes |
//! | `recovery.rs` | recovering from a fault by itself: a barrier at the head of the arrivals, advanced by every waiter's look |
//! | `claim.rs` | `ArcClaim`: a claim on a slot that holds the device (no borrow, no `unsafe`) |
//! | `blocking.rs` | the blocking forms: the same futures, polled on the calling thread |

mod barrier;
mod blocking;
mod claim;
mod hub;
mod recovery;
mod submit;
mod ticket;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytemuck::Pod;

pub use self::barrier::{PublishFuture, SharedCloseFuture};
use self::claim::Cell;
use self::hub::{Hub, SharedLane};
pub use self::submit::SubmitFuture;
pub use self::ticket::Ticket;

use crate::contract::buffer::DeviceBuffer;
use crate::contract::code::CodeRef;
use crate::contract::config::DeviceConfig;
use crate::contract::device::{ContractStats, Device, Health};
use crate::contract::error::{Action, Error, ErrorKind};
use crate::contract::lane::Lane;
use crate::contract::slot::{Depth, SupportedDepth};
use crate::contract::spec::RunSpec;
use crate::contract::workload::Workload;
use crate::driver::Driver;

/// A shared device over an erased driver ([`AnyDriver`](crate::driver::AnyDriver)): one type for the
/// simulator and the `acl` driver alike, to name in a function, a struct
/// field or a task's signature (`DEPTH` stays a const generic, default 2).
/// Open one with a boxed driver.
///
/// ```
/// use runclaim::contract::AnySharedDevice;
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
/// use runclaim::{Callable, DeviceConfig, Input, RunSpec};
///
/// // Takes the device whatever it runs on.
/// fn triple(shared: &AnySharedDevice<4>, x: u32) -> Result<u32, runclaim::Error> {
///     let code = shared.code("x3")?;
///     Ok(shared.run_blocking(RunSpec::new(code, Input::Host(&[x])))?.values[0])
/// }
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let shared = AnySharedDevice::<4>::open(Box::new(sim), DeviceConfig::default())?;
/// shared.publish(&[Callable::program("x3", &Program::new().mul(3))])?;
/// assert_eq!(triple(&shared, 5)?, 15);
/// # Ok::<(), runclaim::Error>(())
/// ```
pub type AnySharedDevice<const DEPTH: usize = 2> = SharedDevice<crate::driver::AnyDriver, DEPTH>;

/// A device many tasks share: clone it into every task
/// (`Clone + Send + Sync + 'static`), [`submit`](SharedDevice::submit) runs
/// from each — a [`RunSpec`](crate::RunSpec) of code this handle
/// published, or an owned [`Workload`](crate::Workload) (owned host
/// tensors, [`shared`](crate::Workload::shared) device buffers) — and each
/// submission's result comes back to the task that submitted it, through
/// its own [`Ticket`]. Nothing borrows: the handle owns its [`Device`],
/// whose typed contract runs underneath unchanged, on claims that hold the
/// device.
///
/// - **Admission order is submission order**, and launch order is
///   admission order: runs queue on the device's stream pair as a
///   [`Pipeline`](crate::Pipeline)'s do, up to `DEPTH` launched at once.
/// - **Backpressure.** When every slot is busy, [`submit`](SharedDevice::submit)
///   waits (its future, or [`submit_blocking`](SharedDevice::submit_blocking)
///   blocking); [`try_submit`](SharedDevice::try_submit) refuses at once and
///   hands the work back.
/// - **Cancellation.** A dropped submission leaves the queue; a dropped
///   ticket loses only its own result: its run completes and its slot
///   comes back. Nothing here blocks an executor.
/// - **Errors hand back what was submitted**: a refused submission its work,
///   a failed run its workload.
/// - **Code references own their publication**: [`code`](SharedDevice::code)
///   hands out a `CodeRef<'static>`, refused
///   ([`ErrorKind::CodeRepublished`]) once [`publish`](SharedDevice::publish)
///   has replaced it. A publication first settles every outstanding run
///   into its ticket — it never waits for a ticket's holder to act.
/// - **A fault fails one run, not the device.** The faulting run's ticket
///   gets its fault, naming itself; a run queued behind it gets its own
///   result when its fence and records prove it, or
///   [`ErrorKind::FaultAhead`] naming the run that faulted
///   ([`Error::collateral`]: resubmit it). The handle then recovers by
///   itself — the next submission, publication or close at the head of
///   the queue settles every run in flight, proves the queue quiet,
///   re-creates faulted streams and re-admits — within about
///   `2 × (DEPTH + 1) ×` [`fence_timeout`](crate::contract::DeviceConfig::fence_timeout);
///   meanwhile `submit` waits and `try_submit` refuses with
///   [`ErrorKind::Recovering`]. A device that cannot recover closes
///   itself ([`ErrorKind::Lost`], [`Health::lost`]). The guide's section
///   "When a run faults on a shared device" (`docs/async.md`) has the
///   whole story and an example.
/// - **`Input::Previous` is refused** ([`ErrorKind::ChainAcrossTasks`]):
///   "the run launched before" would be another task's.
/// - **Closing** ([`close`](SharedDevice::close), [`close_async`](SharedDevice::close_async))
///   refuses new submissions; runs already admitted still resolve. The last
///   handle's drop never blocks its thread: the bounded wait it still owes
///   the device (its runs' fences, the device's teardown) runs on a thread
///   of its own.
///
/// ```
/// use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let shared = SharedDevice::<_, 4>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
/// shared.publish(&[Callable::program("x3", &Program::new().mul(3))])?;
/// let tasks: Vec<_> = (0..8u32)
///     .map(|i| {
///         let shared = shared.clone(); // one handle per task
///         std::thread::spawn(move || {
///             let x3 = shared.code("x3")?;
///             let ticket = shared.submit_blocking(RunSpec::new(x3, Input::Host(&[i])))?;
///             Ok::<_, runclaim::Error>(ticket.wait()?.values)
///         })
///     })
///     .collect();
/// for (i, t) in tasks.into_iter().enumerate() {
///     assert_eq!(t.join().unwrap()?, [3 * i as u32]); // each task its own result
/// }
/// # Ok::<(), runclaim::Error>(())
/// ```
pub struct SharedDevice<D: Driver + 'static, const DEPTH: usize = 2> {
    inner: Arc<Inner<D, DEPTH>>,
}

/// The handle's one allocation: the device (shared with the lanes'
/// claims) and the state under its lock.
pub(crate) struct Inner<D: Driver + 'static, const DEPTH: usize> {
    cell: Arc<Cell<D, DEPTH>>,
    hub: Mutex<Option<Hub<D, DEPTH>>>,
}

impl<D: Driver + 'static, const DEPTH: usize> Clone for SharedDevice<D, DEPTH> {
    fn clone(&self) -> Self {
        SharedDevice {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<D: Driver + 'static, const DEPTH: usize> std::fmt::Debug for SharedDevice<D, DEPTH> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedDevice")
            .field("depth", &DEPTH)
            .field("health", &self.health())
            .finish_non_exhaustive()
    }
}

impl<D: Driver + 'static, const DEPTH: usize> Inner<D, DEPTH> {
    /// The state, under its lock (a panic that interrupted a holder leaves
    /// it usable: every change is one lane transition, which a panic cannot
    /// leave half done).
    fn hub(&self) -> HubGuard<'_, D, DEPTH> {
        HubGuard(self.hub.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The hub, locked (`None` only while the last drop takes it away).
struct HubGuard<'a, D: Driver + 'static, const DEPTH: usize>(MutexGuard<'a, Option<Hub<D, DEPTH>>>);

impl<D: Driver + 'static, const DEPTH: usize> std::ops::Deref for HubGuard<'_, D, DEPTH> {
    type Target = Hub<D, DEPTH>;
    fn deref(&self) -> &Hub<D, DEPTH> {
        // Taken only by the last drop, when no handle, ticket or future is
        // left to lock it.
        self.0
            .as_ref()
            .unwrap_or_else(|| unreachable!("the hub is gone"))
    }
}

impl<D: Driver + 'static, const DEPTH: usize> std::ops::DerefMut for HubGuard<'_, D, DEPTH> {
    fn deref_mut(&mut self) -> &mut Hub<D, DEPTH> {
        self.0
            .as_mut()
            .unwrap_or_else(|| unreachable!("the hub is gone"))
    }
}

impl<D: Driver + 'static, const DEPTH: usize> SharedDevice<D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// Opens `driver` as a device ([`Device::open`]) and shares it. Nothing
    /// is published yet: [`publish`](SharedDevice::publish) first.
    ///
    /// # Errors
    /// As [`Device::open`]; the driver comes back inside the error.
    pub fn open(driver: D, config: DeviceConfig) -> Result<Self, Error<D>> {
        Device::open(driver, config).map(Self::new)
    }

    /// Replays the device's runs (`true`) or launches them (`false`, the
    /// default), as [`Pipeline::replay`](crate::Pipeline::replay) does for
    /// a pipeline: each slot's run captured at the slot's first
    /// submission, replayed after with one runtime call, captured again
    /// when a submission's shape differs from its slot's capture. A
    /// publication ([`publish`](Self::publish)) destroys every slot's
    /// graph under its barrier (nothing in flight), and each slot's next
    /// run captures again with the new code.
    ///
    /// ```
    /// use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let shared = SharedDevice::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// shared.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// shared.replay(true);
    /// let f = shared.code("f")?;
    /// for i in 0..4 {
    ///     let done = shared.submit_blocking(RunSpec::new(f, Input::Host(&[i])))?.wait()?;
    ///     assert_eq!(done.values, [i + 1]);
    /// }
    /// // One after the other, every run took slot 0: captured once.
    /// assert_eq!((shared.stats().captures, shared.stats().replays), (1, 4));
    /// shared.publish(&[Callable::program("f", &Program::new().add(2))])?;
    /// let f = shared.code("f")?;
    /// assert_eq!(shared.submit_blocking(RunSpec::new(f, Input::Host(&[1])))?.wait()?.values, [3]);
    /// assert_eq!(shared.stats().captures, 2); // the new code, captured again
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    pub fn replay(&self, on: bool) {
        let mut hub = self.inner.hub();
        let port = self.inner.cell.device.port();
        for lane in &mut hub.lanes {
            if let Some(id) = lane.set_replay(on) {
                port.drop_capture(id);
            }
        }
    }

    /// Shares an open device (which the handle then owns: its slots must
    /// be free — no runner of it is alive, since the device is moved).
    #[must_use]
    pub fn new(device: Device<D, DEPTH>) -> Self {
        let cell = Arc::new(Cell { device });
        let capacity = cell.device.max_elements();
        let lanes: Vec<SharedLane<D, DEPTH>> =
            (0..DEPTH).map(|i| Lane::unclaimed(i, capacity)).collect();
        let lanes = <[SharedLane<D, DEPTH>; DEPTH]>::try_from(lanes)
            .unwrap_or_else(|_| unreachable!("DEPTH lanes made"));
        let mut hub = Hub::new(lanes);
        hub.renew(&cell);
        SharedDevice {
            inner: Arc::new(Inner {
                cell,
                hub: Mutex::new(Some(hub)),
            }),
        }
    }
}

impl<D: Driver + 'static, const DEPTH: usize> SharedDevice<D, DEPTH> {
    /// A published callable by name, as a code reference that owns its
    /// publication: valid in any task, refused once the device published
    /// again ([`ErrorKind::CodeRepublished`]).
    ///
    /// # Errors
    /// [`ErrorKind::UnknownCallable`].
    pub fn code(&self, name: &str) -> Result<CodeRef<'static>, Error> {
        let hub = self.inner.hub();
        let device = &self.inner.cell.device;
        hub.code
            .iter()
            .find(|c| c.name == name)
            .map(|c| CodeRef::new(device.id(), c.handle, hub.publication))
            .ok_or_else(|| Error::plain(Action::Lookup, ErrorKind::UnknownCallable(name.into())))
    }

    /// Allocates a device buffer of `len` elements, shared: bind it in
    /// workloads with [`Workload::shared`](crate::Workload::shared); read
    /// or write it from the host while no workload holds it.
    ///
    /// # Errors
    /// As [`Device::alloc_buffer`].
    pub fn alloc_buffer<T: Pod>(&self, len: usize) -> Result<Arc<DeviceBuffer<T>>, Error> {
        self.inner.cell.device.alloc_buffer(len).map(Arc::new)
    }

    /// Reads `buffer` from element `at` into `dst`: only while this is its
    /// one share — no workload (so no run) holds it.
    ///
    /// # Errors
    /// [`ErrorKind::BufferShared`] while another share is alive; otherwise
    /// as [`Device::read_buffer`].
    pub fn read_buffer<T: Pod>(
        &self,
        buffer: &mut Arc<DeviceBuffer<T>>,
        at: usize,
        dst: &mut [T],
    ) -> Result<(), Error> {
        let b = exclusive(buffer, Action::Read)?;
        self.inner.cell.device.read_buffer(b, at, dst)
    }

    /// Writes `src` into `buffer` from element `at`: only while this is its
    /// one share.
    ///
    /// # Errors
    /// As [`read_buffer`](SharedDevice::read_buffer).
    pub fn write_buffer<T: Pod>(
        &self,
        buffer: &mut Arc<DeviceBuffer<T>>,
        at: usize,
        src: &[T],
    ) -> Result<(), Error> {
        let b = exclusive(buffer, Action::Write)?;
        self.inner.cell.device.write_buffer(b, at, src)
    }

    /// The device's run-time state.
    #[must_use]
    pub fn health(&self) -> Health {
        let mut health = self.inner.cell.device.health();
        let hub = self.inner.hub();
        health.recoveries = hub.recoveries;
        health.last_recovery = hub.last_recovery;
        health.recovering = hub.recovery.is_some();
        health.lost = hub.lost;
        health
    }

    /// The driver the device runs on (as [`Device::driver`]: e.g. to arm
    /// a simulator's faults).
    #[must_use]
    pub fn driver(&self) -> &D {
        self.inner.cell.device.driver()
    }

    /// The device's counters since it opened.
    #[must_use]
    pub fn stats(&self) -> ContractStats {
        self.inner.cell.device.stats()
    }

    /// Refuses every submission from now on ([`ErrorKind::Closed`]); runs
    /// already admitted still resolve into their tickets. See
    /// [`close_async`](SharedDevice::close_async) to wait for them.
    pub fn close(&self) {
        let mut hub = self.inner.hub();
        hub.closed = true;
        hub.wake_all();
    }

    /// `true` once closed.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.inner.hub().closed
    }

    /// The depth: how many runs are launched at once at most.
    #[must_use]
    pub const fn depth(&self) -> usize {
        DEPTH
    }
}

/// `buffer` for host access: only as its one share.
fn exclusive<T: Pod>(
    buffer: &mut Arc<DeviceBuffer<T>>,
    action: Action,
) -> Result<&mut DeviceBuffer<T>, Error> {
    let id = buffer.id();
    Arc::get_mut(buffer).ok_or_else(|| Error::plain(action, ErrorKind::BufferShared { buffer: id }))
}

/// The last handle (and the last ticket and future) gone: what it still
/// owes the device — its lanes' runs, each waited for (bounded) as a
/// dropped run is, and the device's teardown — is paid on a thread of its
/// own, never on the dropping thread (an executor's, or a driver's callback
/// thread inside a wake). Without a thread to spare, it is paid here.
impl<D: Driver + 'static, const DEPTH: usize> Drop for Inner<D, DEPTH> {
    fn drop(&mut self) {
        let hub = self
            .hub
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let cell = Arc::clone(&self.cell);
        crate::sync::pay_elsewhere("runclaim-shared-close", move || {
            drop(hub);
            drop(cell);
        });
    }
}

/// `?` on a failed run drops its workload and keeps the error.
impl From<Error<Option<Workload<'_>>>> for Error {
    fn from(e: Error<Option<Workload<'_>>>) -> Self {
        e.without_value()
    }
}

/// `?` on a refused submission of a workload drops it and keeps the error.
impl From<Error<Workload<'_>>> for Error {
    fn from(e: Error<Workload<'_>>) -> Self {
        e.without_value()
    }
}

/// `?` on a refused submission of a spec drops it and keeps the error.
impl From<Error<RunSpec<'_>>> for Error {
    fn from(e: Error<RunSpec<'_>>) -> Self {
        e.without_value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimDriver;
    use static_assertions::assert_impl_all;

    assert_impl_all!(SharedDevice<SimDriver, 2>: Clone, Send, Sync);
    assert_impl_all!(Ticket<SimDriver, 2>: Send, Sync, Unpin);
    assert_impl_all!(crate::contract::Done: Send, Sync);
}
