//! Simulated device memory: allocations at real addresses, separated by
//! unmapped guard gaps, with every access bounds-checked. A bad address is an
//! error, never undefined behaviour, and never reaches another allocation.

use std::collections::BTreeMap;

/// First address handed out; small integers are never valid device addresses.
const BASE: u64 = 0x1_0000_0000;
/// Unmapped bytes between allocations, so an overrun is an error, not a
/// write into a neighbour.
const GUARD: u64 = 4096;
/// Allocation alignment.
const ALIGN: u64 = 64;

/// An access outside every live allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fault {
    pub addr: u64,
    pub len: u64,
}

#[derive(Debug)]
pub(crate) struct Memory {
    blocks: BTreeMap<u64, Vec<u8>>,
    next: u64,
    limit: u64,
    used: u64,
}

impl Memory {
    pub fn new(limit: u64) -> Self {
        Memory {
            blocks: BTreeMap::new(),
            next: BASE,
            limit,
            used: 0,
        }
    }

    /// Allocates `len` bytes (zero-filled). `None` when the limit is reached.
    pub fn alloc(&mut self, len: u64) -> Option<u64> {
        if len == 0 || self.used.checked_add(len)? > self.limit {
            return None;
        }
        let base = self.next;
        let rounded = len.checked_add(ALIGN - 1)? / ALIGN * ALIGN;
        self.next = base.checked_add(rounded)?.checked_add(GUARD)?;
        // A host allocation failure is out-of-memory, never an abort.
        let n = usize::try_from(len).ok()?;
        let mut block = Vec::new();
        block.try_reserve_exact(n).ok()?;
        block.resize(n, 0);
        self.blocks.insert(base, block);
        self.used += len;
        Some(base)
    }

    /// Frees the allocation starting exactly at `base`.
    pub fn free(&mut self, base: u64) -> bool {
        match self.blocks.remove(&base) {
            Some(b) => {
                self.used -= b.len() as u64;
                true
            }
            None => false,
        }
    }

    pub fn live_bytes(&self) -> u64 {
        self.used
    }

    fn locate(&self, addr: u64, len: u64) -> Result<(u64, usize), Fault> {
        let fault = Fault { addr, len };
        let (&base, block) = self.blocks.range(..=addr).next_back().ok_or(fault)?;
        let off = addr - base;
        let end = off.checked_add(len).ok_or(fault)?;
        if end > block.len() as u64 {
            return Err(fault);
        }
        Ok((base, usize::try_from(off).map_err(|_| fault)?))
    }

    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), Fault> {
        let (base, off) = self.locate(addr, out.len() as u64)?;
        out.copy_from_slice(&self.blocks[&base][off..off + out.len()]);
        Ok(())
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        let (base, off) = self.locate(addr, data.len() as u64)?;
        let block = self.blocks.get_mut(&base).ok_or(Fault {
            addr,
            len: data.len() as u64,
        })?;
        block[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    pub fn fill(&mut self, addr: u64, value: u8, len: u64) -> Result<(), Fault> {
        let (base, off) = self.locate(addr, len)?;
        let block = self.blocks.get_mut(&base).ok_or(Fault { addr, len })?;
        let len = usize::try_from(len).map_err(|_| Fault { addr, len })?;
        block[off..off + len].fill(value);
        Ok(())
    }

    /// Device-to-device copy; the ranges may overlap.
    pub fn copy(&mut self, dst: u64, src: u64, len: u64) -> Result<(), Fault> {
        let (sbase, soff) = self.locate(src, len)?;
        self.locate(dst, len)?;
        let n = usize::try_from(len).map_err(|_| Fault { addr: src, len })?;
        let tmp = self.blocks[&sbase][soff..soff + n].to_vec();
        self.write(dst, &tmp)
    }

    pub fn check(&self, addr: u64, len: u64) -> Result<(), Fault> {
        self.locate(addr, len).map(|_| ())
    }

    pub fn read_u64(&self, addr: u64) -> Result<u64, Fault> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn write_u64(&mut self, addr: u64, v: u64) -> Result<(), Fault> {
        self.write(addr, &v.to_le_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_enforced_and_neighbours_untouched() {
        let mut m = Memory::new(1 << 20);
        let a = m.alloc(100).unwrap();
        let b = m.alloc(100).unwrap();
        assert!(b >= a + 100 + GUARD);
        m.write(a, &[7; 100]).unwrap();
        assert!(m.write(a + 1, &[1; 100]).is_err(), "overrun must fail");
        assert!(
            m.write(a + 100, &[1]).is_err(),
            "one past the end must fail"
        );
        let mut out = [0u8; 100];
        m.read(b, &mut out).unwrap();
        assert_eq!(out, [0; 100], "the neighbour was not written");
        assert!(m.read(a - 1, &mut [0u8; 1]).is_err());
        assert!(m.free(a));
        assert!(!m.free(a), "double free is refused");
        assert!(
            m.read(a, &mut [0u8; 1]).is_err(),
            "freed memory is unreachable"
        );
        assert!(m.write(u64::MAX - 3, &[0; 8]).is_err(), "overflowing range");
    }

    #[test]
    fn limit_and_zero_size() {
        let mut m = Memory::new(128);
        assert_eq!(m.alloc(0), None);
        assert!(m.alloc(100).is_some());
        assert_eq!(m.alloc(100), None);
        assert_eq!(m.live_bytes(), 100);
    }
}
