//! What a [`Pipeline`](crate::Pipeline) and a
//! [`SharedDevice`](crate::SharedDevice) hand back for a finished run: one
//! type, [`Completed`] (a shared device's is [`Done`], without a tag), whose
//! `values` are lent from a pipeline's lane, or — a ticket's run outlives
//! its lane's reuse — a buffer a shared device recycles ([`Values`]), so
//! neither allocates per run.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::{Arc, Mutex, PoisonError};

use crate::contract::error::RunId;
use crate::contract::workload::Workload;
use crate::driver::abi::WallRecord;

/// A finalized run handed back — by [`Pipeline::complete`](crate::Pipeline::complete)
/// or a [`SharedDevice`](crate::SharedDevice)'s ticket ([`Done`]): its tag,
/// its records, a [`RunSpec`](crate::RunSpec) run's outputs (`V`: for a
/// pipeline a slice lent from its buffer for that slot until the next call
/// on the pipeline; for a shared device [`Values`], a pooled buffer, the
/// run's own until dropped) and a workload's run's workload, whose owned
/// host tensors hold what the device wrote.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let mut pipe = Pipeline::new(&runner)?;
/// let id = pipe.submit(RunSpec::new(code, Input::Host(&[1, 2])), 'a')?;
/// let done = pipe.complete()?.expect("one run pending");
/// assert_eq!((done.tag, done.run, done.values), ('a', id, &[2, 3][..]));
/// assert_eq!(done.wall.run_id, id.get()); // validated to be this run's record
/// assert!(done.work.is_none()); // a RunSpec's run
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Completed<'a, 'r, T, V = &'a [u32]> {
    /// The tag the run was submitted with.
    pub tag: T,
    /// The run.
    pub run: RunId,
    /// Its launch sequence number (stream order).
    pub seq: u64,
    /// Its device-wall record (validated to be this run's).
    pub wall: WallRecord,
    /// A [`RunSpec`](crate::RunSpec) run's outputs (empty for a
    /// workload's run).
    pub values: V,
    /// A workload's run's workload, to read, refill and submit again
    /// (`None` for a [`RunSpec`](crate::RunSpec)'s run).
    pub work: Option<Workload<'r>>,
    /// What a pipeline's `values` borrow (a shared device's borrow
    /// nothing).
    pub(crate) lent: PhantomData<&'a [u32]>,
}

/// A finished run of a [`SharedDevice`](crate::SharedDevice): a
/// [`Completed`] with no tag (a ticket is its own tag).
///
/// ```
/// use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};
/// use runclaim::sim::{SimConfig, SimDriver};
/// use runclaim::driver::abi::Program;
///
/// let shared = SharedDevice::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// shared.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let done: runclaim::contract::Done = shared.submit_blocking(RunSpec::new(shared.code("inc")?, Input::Host(&[1, 2])))?.wait()?;
/// assert_eq!(done.values, [2, 3]); // the run's own: it outlives the slot's next run
/// # Ok::<(), runclaim::Error>(())
/// ```
pub type Done = Completed<'static, 'static, (), Values>;

/// What a shared device's ticket resolves to: the finished run, or why it
/// produced no result, with its workload handed back.
pub(crate) type Delivery = Result<Done, crate::contract::error::Error<Option<Workload<'static>>>>;

/// A shared device's [`RunSpec`](crate::RunSpec) run's outputs ([`Done`]'s
/// `values`): a slice ([`Deref`]) that compares with arrays, slices and
/// vectors. They are copied once from the run's lane into a buffer of the
/// device's pool, which goes back to the pool when the values drop — so a
/// shared device allocates no buffer per run once its pool holds as many
/// as are alive at once.
pub struct Values {
    buf: Vec<u32>,
    /// `None`: no values (a workload's run's).
    pool: Option<Arc<ValuePool>>,
}

impl Values {
    /// No values (a workload's run's).
    pub(crate) const EMPTY: Values = Values {
        buf: Vec::new(),
        pool: None,
    };

    /// `values` copied into a buffer of `pool`, the values' own until they
    /// drop.
    pub(crate) fn pooled(values: &[u32], pool: &Arc<ValuePool>) -> Self {
        let mut buf = pool.take();
        buf.clear();
        buf.extend_from_slice(values);
        Values {
            buf,
            pool: Some(Arc::clone(pool)),
        }
    }

    /// The values as a vector of their own (the buffer leaves the pool).
    #[must_use]
    pub fn into_vec(mut self) -> Vec<u32> {
        self.pool = None;
        std::mem::take(&mut self.buf)
    }
}

impl Drop for Values {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.give(std::mem::take(&mut self.buf));
        }
    }
}

impl Deref for Values {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        &self.buf
    }
}

impl AsRef<[u32]> for Values {
    fn as_ref(&self) -> &[u32] {
        self
    }
}

impl fmt::Debug for Values {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl PartialEq for Values {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Values {}

impl PartialEq<[u32]> for Values {
    fn eq(&self, other: &[u32]) -> bool {
        **self == *other
    }
}

impl PartialEq<&[u32]> for Values {
    fn eq(&self, other: &&[u32]) -> bool {
        **self == **other
    }
}

impl<const N: usize> PartialEq<[u32; N]> for Values {
    fn eq(&self, other: &[u32; N]) -> bool {
        **self == other[..]
    }
}

impl<const N: usize> PartialEq<&[u32; N]> for Values {
    fn eq(&self, other: &&[u32; N]) -> bool {
        **self == other[..]
    }
}

impl PartialEq<Vec<u32>> for Values {
    fn eq(&self, other: &Vec<u32>) -> bool {
        **self == other[..]
    }
}

/// A shared device's spare value buffers: taken by a ticket's run as it is
/// collected, given back as its values drop. It keeps at most
/// [`ValuePool::KEEP`] buffers (more alive at once are freed as they
/// drop).
#[derive(Debug, Default)]
pub(crate) struct ValuePool(Mutex<Vec<Vec<u32>>>);

impl ValuePool {
    /// The most spare buffers kept.
    const KEEP: usize = 64;

    fn take(&self) -> Vec<u32> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_default()
    }

    fn give(&self, buf: Vec<u32>) {
        if buf.capacity() == 0 {
            return;
        }
        let mut spare = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.len() < Self::KEEP {
            spare.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pooled buffer goes back to the pool on drop and is reused: the
    /// second run's values reuse the first's allocation.
    #[test]
    fn pooled_values_reuse_their_buffer() {
        let pool = Arc::new(ValuePool::default());
        let a = Values::pooled(&[1, 2, 3], &pool);
        let at = a.as_ptr();
        assert_eq!(a, [1, 2, 3]);
        drop(a);
        let b = Values::pooled(&[4, 5], &pool);
        assert_eq!((b.as_ptr(), &*b), (at, &[4, 5][..]));
        // Negative control: two alive at once cannot share a buffer.
        let c = Values::pooled(&[6], &pool);
        assert_ne!(c.as_ptr(), b.as_ptr());
    }

    #[test]
    fn values_compare_as_their_slice() {
        let pool = Arc::new(ValuePool::default());
        let v = Values::pooled(&[7, 8], &pool);
        assert_eq!(v, [7, 8]);
        assert_eq!(v, vec![7, 8]);
        assert_eq!(v, &[7, 8][..]);
        assert_eq!(format!("{v:?}"), "[7, 8]");
        assert_eq!(v.into_vec(), [7, 8]);
        assert_eq!(Values::EMPTY.len(), 0);
    }
}
