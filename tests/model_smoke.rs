//! The reference model on fixed sequences: the property tests' harness does
//! real work (runs launched and checked), and the model agrees with the
//! contract on a hand-written pipeline.

mod common;

use common::model::{In, Op, run_case};

fn pipeline() -> Vec<Op> {
    use Op::*;
    vec![
        Take(0),
        Take(1),
        Prepare(0, 0, In::Host(vec![1, 2, 3])),
        Prepare(1, 1, In::Previous),
        Launch(0),
        Launch(1),
        TryFence(1),
        Fence(1),
        TryFence(0),
        Finalize(1),
        Finalize(0),
        Prepare(0, 1, In::Previous),
        Launch(0),
        Forget(0),
        Publish(1),
        Take(0),
        Prepare(0, 0, In::Previous),
        Launch(0),
        Step(30),
        Fence(0),
        Finalize(0),
        Drain,
        Take(1),
        Prepare(1, 1, In::Host(vec![])),
        Prepare(1, 1, In::TooLong),
        Prepare(1, 1, In::Host(vec![9])),
        Launch(1),
        Drop(1),
    ]
}

#[test]
fn a_hand_written_pipeline_matches_the_model() {
    let r = run_case::<_, 2>(&pipeline(), 7, |s| s).unwrap();
    println!("{r:?}");
    assert_eq!(r.launched, 5);
    assert_eq!(r.finalized, 3, "three runs finalized with checked values");
    assert!(r.driver_calls > 50);
    let r3 = run_case::<_, 3>(&pipeline(), 7, |s| s).unwrap();
    assert_eq!((r3.launched, r3.finalized), (5, 3));
}
