//! The AICore code format: a [`Program`] of [`Instr`]uctions, how it is
//! encoded into a code image and decoded back ([`CodeError`]), and what it
//! computes.

use super::TensorArg;

/// One instruction of an AICore program; each worker applies the program to
/// every element of its share, in order, with wrapping `u32` arithmetic.
///
/// ```
/// use runclaim::driver::abi::{Instr, Program};
///
/// assert_eq!(Program::new().add(1).fail(9).instrs(), &[Instr::Add(1), Instr::Fail(9)]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Instr {
    /// `x + k`
    Add(u32),
    /// `x * k`
    Mul(u32),
    /// `x ^ k`
    Xor(u32),
    /// Stop: the task fails with error code `k` (non-zero). Elements keep the
    /// value computed so far.
    Fail(u32),
}

/// Why a code image is not a valid [`Program`].
///
/// ```
/// use runclaim::driver::abi::{CodeError, Program};
///
/// assert_eq!(Program::decode(b"ELF?"), Err(CodeError::BadMagic));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeError {
    /// The image does not start with [`Program::MAGIC`].
    #[error("missing RCK1 magic")]
    BadMagic,
    /// The image length is not the header plus whole instructions.
    #[error("truncated instruction")]
    Truncated,
    /// An opcode byte is not one of the known instructions.
    #[error("unknown opcode")]
    UnknownOpcode,
    /// `Fail(0)` would report success.
    #[error("Fail(0) is not an error")]
    ZeroFailCode,
}

impl CodeError {
    /// A static description, for error kinds that carry `&'static str`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            CodeError::BadMagic => "missing RCK1 magic",
            CodeError::Truncated => "truncated instruction",
            CodeError::UnknownOpcode => "unknown opcode",
            CodeError::ZeroFailCode => "Fail(0) is not an error",
        }
    }
}

/// An AICore program: the "code" a callable carries. Encoded as the magic
/// `"RCK1"` followed by 5-byte instructions (opcode, little-endian `u32`).
///
/// # What a launch computes
///
/// Every worker applies the program to each `u32` (little-endian) element
/// of its [`worker_share`](super::worker_share) of the run's elements,
/// writes the results, and reports the program's [`fail_code`](Self::fail_code)
/// (0: success) as its task's error code. Which elements depends on the
/// argument block's version ([`ArgBlock`](super::ArgBlock)):
///
/// - **Version 1** ([`RunArgs`](super::RunArgs)): `len` elements from
///   `input` to `output`.
/// - **Version 2** ([`WorkArgs`](super::WorkArgs)): from the *first* tensor
///   whose direction reads ([`Dir::In`](super::Dir::In) or
///   [`InOut`](super::Dir::InOut)) to the *first* tensor whose direction
///   writes ([`Out`](super::Dir::Out) or `InOut`) — the same tensor when it
///   is one `InOut` — over `min(bytes_in / 4, bytes_out / 4)` elements,
///   whatever the tensors' `elem_size`. A block with no readable or no
///   writable tensor computes nothing; the run still completes and reports
///   the fail code. Further tensors and the scalars are ignored.
///
/// ```
/// use runclaim::driver::abi::Program;
///
/// let p = Program::new().add(3).mul(2);
/// assert_eq!(p.apply(4), Ok(14));
/// assert_eq!(Program::decode(&p.encode()), Ok(p));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Program {
    instrs: Vec<Instr>,
}

impl Program {
    /// First four bytes of every encoded program.
    pub const MAGIC: [u8; 4] = *b"RCK1";

    /// The empty program (identity).
    #[must_use]
    pub fn new() -> Self {
        Program::default()
    }

    /// Appends `x + k`.
    #[must_use]
    #[allow(
        clippy::should_implement_trait,
        reason = "a builder step named after the instruction, not `Program + u32`"
    )]
    pub fn add(mut self, k: u32) -> Self {
        self.instrs.push(Instr::Add(k));
        self
    }

    /// Appends `x * k`.
    #[must_use]
    #[allow(
        clippy::should_implement_trait,
        reason = "a builder step named after the instruction, not `Program * u32`"
    )]
    pub fn mul(mut self, k: u32) -> Self {
        self.instrs.push(Instr::Mul(k));
        self
    }

    /// Appends `x ^ k`.
    #[must_use]
    pub fn xor(mut self, k: u32) -> Self {
        self.instrs.push(Instr::Xor(k));
        self
    }

    /// Appends a task failure with `code` (which must be non-zero to encode
    /// a decodable program).
    #[must_use]
    pub fn fail(mut self, code: u32) -> Self {
        self.instrs.push(Instr::Fail(code));
        self
    }

    /// The instructions.
    #[must_use]
    pub fn instrs(&self) -> &[Instr] {
        &self.instrs
    }

    /// Encodes the program as a code image.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 5 * self.instrs.len());
        out.extend_from_slice(&Self::MAGIC);
        for i in &self.instrs {
            let (op, k) = match *i {
                Instr::Add(k) => (1u8, k),
                Instr::Mul(k) => (2, k),
                Instr::Xor(k) => (3, k),
                Instr::Fail(k) => (0x0f, k),
            };
            out.push(op);
            out.extend_from_slice(&k.to_le_bytes());
        }
        out
    }

    /// Decodes a code image.
    ///
    /// # Errors
    /// [`CodeError`] when the image is not a well-formed program.
    pub fn decode(code: &[u8]) -> Result<Self, CodeError> {
        let body = code.strip_prefix(&Self::MAGIC).ok_or(CodeError::BadMagic)?;
        if body.len() % 5 != 0 {
            return Err(CodeError::Truncated);
        }
        let instrs = body
            .chunks_exact(5)
            .map(|c| {
                let k = u32::from_le_bytes([c[1], c[2], c[3], c[4]]);
                match c[0] {
                    1 => Ok(Instr::Add(k)),
                    2 => Ok(Instr::Mul(k)),
                    3 => Ok(Instr::Xor(k)),
                    0x0f if k == 0 => Err(CodeError::ZeroFailCode),
                    0x0f => Ok(Instr::Fail(k)),
                    _ => Err(CodeError::UnknownOpcode),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Program { instrs })
    }

    /// Applies the program to one element.
    ///
    /// # Errors
    /// `Err((value_so_far, code))` when the program reaches `Fail(code)`.
    pub fn apply(&self, mut x: u32) -> Result<u32, (u32, u32)> {
        for i in &self.instrs {
            x = match *i {
                Instr::Add(k) => x.wrapping_add(k),
                Instr::Mul(k) => x.wrapping_mul(k),
                Instr::Xor(k) => x ^ k,
                Instr::Fail(code) => return Err((x, code)),
            };
        }
        Ok(x)
    }

    /// Applies the program to one element, returning the value the device
    /// writes whether or not the task fails.
    #[must_use]
    pub fn apply_lossy(&self, x: u32) -> u32 {
        match self.apply(x) {
            Ok(v) | Err((v, _)) => v,
        }
    }

    /// The error code the task reports (0 when the program never fails).
    #[must_use]
    pub fn fail_code(&self) -> u32 {
        self.instrs
            .iter()
            .find_map(|i| match *i {
                Instr::Fail(c) => Some(c),
                _ => None,
            })
            .unwrap_or(0)
    }
}

/// The elements a [`Program`] computes on a version-2 block's `tensors`
/// (see [`Program`]): `(input address, output address, u32 elements)`;
/// `None` when no tensor reads or none writes. Allocation-free.
pub(crate) fn work_operands(tensors: impl Iterator<Item = TensorArg>) -> Option<(u64, u64, u64)> {
    let (mut input, mut output) = (None, None);
    for t in tensors {
        if input.is_none() && t.dir.reads() {
            input = Some(t);
        }
        if output.is_none() && t.dir.writes() {
            output = Some(t);
        }
        if input.is_some() && output.is_some() {
            break;
        }
    }
    let (i, o) = (input?, output?);
    Some((i.addr, o.addr, (i.bytes / 4).min(o.bytes / 4)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_decode_rejects_malformed_images() {
        assert_eq!(Program::decode(b"ELF\x7f"), Err(CodeError::BadMagic));
        assert_eq!(Program::decode(b"RCK1\x01\x00"), Err(CodeError::Truncated));
        assert_eq!(
            Program::decode(b"RCK1\x09\x00\x00\x00\x00"),
            Err(CodeError::UnknownOpcode)
        );
        assert_eq!(
            Program::decode(&Program::new().fail(0).encode()),
            Err(CodeError::ZeroFailCode)
        );
    }

    #[test]
    fn work_operands_are_the_first_reader_and_the_first_writer() {
        use super::super::Dir;
        let t = |addr, bytes, dir| TensorArg {
            addr,
            bytes,
            elem_size: 4,
            dir,
            staged: false,
        };
        let ops = |ts: &[TensorArg]| work_operands(ts.iter().copied());
        assert_eq!(
            ops(&[t(1, 40, Dir::In), t(2, 48, Dir::Out)]),
            Some((1, 2, 10))
        );
        assert_eq!(
            ops(&[t(1, 9, Dir::Out), t(2, 40, Dir::In), t(3, 8, Dir::InOut)]),
            Some((2, 1, 2)),
            "the first of each, in argument order; bytes / 4 whole elements"
        );
        assert_eq!(ops(&[t(5, 8, Dir::InOut)]), Some((5, 5, 2)), "in place");
        assert_eq!(ops(&[t(1, 8, Dir::In), t(2, 8, Dir::In)]), None);
        assert_eq!(ops(&[t(1, 8, Dir::Out)]), None);
        assert_eq!(ops(&[]), None);
    }

    #[test]
    fn program_semantics() {
        let p = Program::new().add(1).xor(0xff).mul(3);
        assert_eq!(p.apply(1), Ok((2 ^ 0xff) * 3));
        let f = Program::new().add(5).fail(42).add(100);
        assert_eq!(f.apply(1), Err((6, 42)));
        assert_eq!(f.apply_lossy(1), 6);
        assert_eq!(f.fail_code(), 42);
        assert_eq!(Program::new().mul(u32::MAX).apply(2), Ok(u32::MAX - 1));
    }
}
