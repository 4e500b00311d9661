//! The fuzz input as a stream of values (zeros once it runs out).

use crate::driver::abi::RunIdentity;

/// The fuzz input, read front to back.
pub(crate) struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = N.min(self.data.len());
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        out
    }

    pub(crate) fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }

    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    pub(crate) fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }

    pub(crate) fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// A value in `0..=max`.
    pub(crate) fn upto(&mut self, max: usize) -> usize {
        usize::from(self.u16()) % (max + 1)
    }

    /// What is left, as it is.
    pub(crate) fn rest(self) -> &'a [u8] {
        self.data
    }

    /// A run's identity (as the host knows it).
    pub(crate) fn identity(&mut self) -> RunIdentity {
        RunIdentity {
            run_id: self.u64(),
            epoch: self.u64(),
            slot: self.u32(),
            block_dim: self.u32(),
        }
    }

    /// `other`, changed so it is not `v` (another run's identity).
    pub(crate) fn other_than(&mut self, v: u64) -> u64 {
        match self.u64() {
            0 => v ^ 1,
            d => v ^ d,
        }
    }
}
