//! The instant driver's handshake: a block whose handshake region is too
//! short for its block dim is refused before any word is written (the
//! driver checks the whole region once, not word by word).

use runclaim::driver::abi::{self, BlockBuf, Program, RunArgs};
use runclaim::driver::instant::InstantDriver;
use runclaim::driver::{Driver, DriverErrorKind};

fn run_with_handshake(
    handshake_bytes: usize,
    block_dim: u32,
) -> (Result<(), DriverErrorKind>, Vec<u8>) {
    let d = InstantDriver::new();
    let code = d.register_code(&Program::new().encode()).unwrap().handle;
    let (aicore, aicpu) = (d.create_stream().unwrap(), d.create_stream().unwrap());
    let hs = d.alloc(handshake_bytes).unwrap();
    d.memset(hs, 0, handshake_bytes).unwrap();
    let wall = d.alloc(4096).unwrap();
    let status = d.alloc(4096).unwrap();
    let block = RunArgs {
        run_id: 7,
        slot: 0,
        block_dim,
        len: 0,
        input: wall.raw(),
        output: wall.raw(),
        handshake: hs.raw(),
        wall: wall.raw(),
        status: status.raw(),
    }
    .to_bytes();
    let block = BlockBuf::from_bytes(&block);
    d.launch_aicore(aicore, code, block_dim, block.args())
        .unwrap();
    let r = d
        .launch_aicpu(aicpu, block.args())
        .map_err(|e| e.kind().clone());
    let mut bytes = vec![0xEE; handshake_bytes];
    d.copy_from_device(&mut bytes, hs).unwrap();
    (r, bytes)
}

#[test]
fn a_handshake_too_short_for_the_block_dim_is_refused_before_any_word_lands() {
    let short = abi::handshake_bytes(2) - 8;
    let (r, bytes) = run_with_handshake(short, 2);
    assert!(
        matches!(r, Err(DriverErrorKind::BadAddress { .. })),
        "{r:?}"
    );
    assert!(bytes.iter().all(|&b| b == 0), "a word landed: {bytes:?}");
}

/// The control: the same run with a region that fits completes, and its
/// handshake words are written.
#[test]
fn a_handshake_that_fits_is_written() {
    let (r, bytes) = run_with_handshake(abi::handshake_bytes(2), 2);
    assert_eq!(r, Ok(()));
    assert!(bytes.iter().any(|&b| b != 0));
}
