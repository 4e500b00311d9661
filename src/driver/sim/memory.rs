//! Simulated device memory: allocations at real addresses, separated by
//! unmapped guard gaps, with every access bounds-checked. A bad address is an
//! error, never undefined behaviour, and never reaches another allocation.
//!
//! Each allocation remembers its [`Owner`], the `SimDriver` value that made
//! it: the host side (a driver call: a copy, a memset, a free, a launch's
//! recorded ranges) reaches only its own allocations (the `*_as` methods),
//! the device side (kernels, a device model) all of them.

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

/// Who made an allocation, a stream or an event: one `SimDriver` value
/// (each clone is another), as one driver instance's table is on real
/// hardware. Never 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner(pub u64);

/// One live allocation.
#[derive(Debug)]
struct Block {
    base: u64,
    bytes: Vec<u8>,
    owner: Owner,
}

#[derive(Debug)]
pub(crate) struct Memory {
    /// The live allocations, by rising base (bases are handed out rising,
    /// so an allocation is a push; a lookup is one binary search).
    blocks: Vec<Block>,
    next: u64,
    limit: u64,
    used: u64,
}

impl Memory {
    pub fn new(limit: u64) -> Self {
        Memory {
            blocks: Vec::new(),
            next: BASE,
            limit,
            used: 0,
        }
    }

    /// Allocates `len` bytes (zero-filled) for `owner`. `None` when the
    /// limit is reached.
    pub fn alloc(&mut self, len: u64, owner: Owner) -> Option<u64> {
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
        self.blocks.try_reserve(1).ok()?;
        self.blocks.push(Block {
            base,
            bytes: block,
            owner,
        });
        self.used += len;
        Some(base)
    }

    /// Frees `owner`'s allocation starting exactly at `base`; `false` (and
    /// nothing freed) for any other address, another owner's included.
    pub fn free_as(&mut self, owner: Owner, base: u64) -> bool {
        let Ok(i) = self.blocks.binary_search_by_key(&base, |b| b.base) else {
            return false;
        };
        if self.blocks[i].owner != owner {
            return false;
        }
        let b = self.blocks.remove(i);
        self.used -= b.bytes.len() as u64;
        true
    }

    pub fn live_bytes(&self) -> u64 {
        self.used
    }

    /// The allocation holding `addr..addr + len` (one binary search), its
    /// index and the offset in it, when `owner` made it (`None`: any owner,
    /// the device side).
    fn locate_of(
        &self,
        owner: Option<Owner>,
        addr: u64,
        len: u64,
    ) -> Result<(usize, usize), Fault> {
        let fault = Fault { addr, len };
        let i = self
            .blocks
            .partition_point(|b| b.base <= addr)
            .checked_sub(1)
            .ok_or(fault)?;
        let block = &self.blocks[i];
        if owner.is_some_and(|o| o != block.owner) {
            return Err(fault);
        }
        let off = addr - block.base;
        let end = off.checked_add(len).ok_or(fault)?;
        if end > block.bytes.len() as u64 {
            return Err(fault);
        }
        Ok((i, usize::try_from(off).map_err(|_| fault)?))
    }

    fn locate(&self, addr: u64, len: u64) -> Result<(usize, usize), Fault> {
        self.locate_of(None, addr, len)
    }

    /// `Ok` when `addr..addr + len` lies inside one live allocation of
    /// `owner`.
    pub fn check_as(&self, owner: Owner, addr: u64, len: u64) -> Result<(), Fault> {
        self.locate_of(Some(owner), addr, len).map(|_| ())
    }

    /// [`read`](Self::read), from an allocation of `owner` only.
    pub fn read_as(&self, owner: Owner, addr: u64, out: &mut [u8]) -> Result<(), Fault> {
        self.read_of(Some(owner), addr, out)
    }

    /// [`write`](Self::write), into an allocation of `owner` only.
    pub fn write_as(&mut self, owner: Owner, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.write_of(Some(owner), addr, data)
    }

    /// [`fill`](Self::fill), in an allocation of `owner` only.
    pub fn fill_as(&mut self, owner: Owner, addr: u64, value: u8, len: u64) -> Result<(), Fault> {
        self.fill_of(Some(owner), addr, value, len)
    }

    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), Fault> {
        self.read_of(None, addr, out)
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.write_of(None, addr, data)
    }

    pub fn fill(&mut self, addr: u64, value: u8, len: u64) -> Result<(), Fault> {
        self.fill_of(None, addr, value, len)
    }

    fn read_of(&self, owner: Option<Owner>, addr: u64, out: &mut [u8]) -> Result<(), Fault> {
        let (i, off) = self.locate_of(owner, addr, out.len() as u64)?;
        out.copy_from_slice(&self.blocks[i].bytes[off..off + out.len()]);
        Ok(())
    }

    fn write_of(&mut self, owner: Option<Owner>, addr: u64, data: &[u8]) -> Result<(), Fault> {
        let (i, off) = self.locate_of(owner, addr, data.len() as u64)?;
        self.blocks[i].bytes[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn fill_of(
        &mut self,
        owner: Option<Owner>,
        addr: u64,
        value: u8,
        len: u64,
    ) -> Result<(), Fault> {
        let (i, off) = self.locate_of(owner, addr, len)?;
        let len = usize::try_from(len).map_err(|_| Fault { addr, len })?;
        self.blocks[i].bytes[off..off + len].fill(value);
        Ok(())
    }

    /// Device-to-device copy; the ranges may overlap.
    pub fn copy(&mut self, dst: u64, src: u64, len: u64) -> Result<(), Fault> {
        let (si, soff) = self.locate(src, len)?;
        self.locate(dst, len)?;
        let n = usize::try_from(len).map_err(|_| Fault { addr: src, len })?;
        let tmp = self.blocks[si].bytes[soff..soff + n].to_vec();
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

    const ME: Owner = Owner(1);

    #[test]
    fn bounds_are_enforced_and_neighbours_untouched() {
        let mut m = Memory::new(1 << 20);
        let a = m.alloc(100, ME).unwrap();
        let b = m.alloc(100, ME).unwrap();
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
        assert!(m.free_as(ME, a));
        assert!(!m.free_as(ME, a), "double free is refused");
        assert!(
            m.read(a, &mut [0u8; 1]).is_err(),
            "freed memory is unreachable"
        );
        assert!(m.write(u64::MAX - 3, &[0; 8]).is_err(), "overflowing range");
    }

    #[test]
    fn limit_and_zero_size() {
        let mut m = Memory::new(128);
        assert_eq!(m.alloc(0, ME), None);
        assert!(m.alloc(100, ME).is_some());
        assert_eq!(m.alloc(100, ME), None);
        assert_eq!(m.live_bytes(), 100);
    }

    #[test]
    fn the_host_side_reaches_only_its_owners_allocations() {
        let them = Owner(2);
        let mut m = Memory::new(1 << 20);
        let mine = m.alloc(64, ME).unwrap();
        let theirs = m.alloc(64, them).unwrap();
        m.write_as(ME, mine, &[1; 64]).unwrap();
        m.check_as(ME, mine + 8, 56).unwrap();
        let refused = Err(Fault {
            addr: theirs,
            len: 64,
        });
        assert_eq!(m.check_as(ME, theirs, 64), refused);
        assert_eq!(m.write_as(ME, theirs, &[9; 64]), refused);
        assert_eq!(m.read_as(ME, theirs, &mut [0; 64]), refused);
        assert_eq!(m.fill_as(ME, theirs, 9, 64), refused);
        assert!(!m.free_as(ME, theirs), "another owner's allocation stays");
        let mut out = [7u8; 64];
        m.read(theirs, &mut out).unwrap(); // the device side reaches it
        assert_eq!(out, [0; 64], "untouched");
        m.check_as(them, theirs, 64).unwrap();
        assert!(m.free_as(them, theirs));
    }
}
