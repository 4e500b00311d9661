//! One thread, several drivers, each on its own device: a
//! thread has one current device context — the last `aclrtSetDevice` wins —
//! so every call of a driver must run in *its* device's context whatever
//! the thread did before. Checked on the fake runtime, whose stream and event
//! handles belong to a device (another device's stream is refused with
//! 107003) and whose counters say which device every allocation, stream and
//! event landed on.

mod common;

use std::time::Duration;

use common::acl::{Control, control, control_lite, open, open_lite};
use runclaim::driver::Driver;
use runclaim::driver::acl::AclDriver;
use runclaim::sim::SimConfig;

fn fast() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

/// Allocations, streams and events on the device behind `d`.
fn counts(c: &Control, d: &AclDriver) -> (u64, u64, u64) {
    let s = c.stats(d.device_id());
    (s.allocations, s.streams_created, s.events_created)
}

/// A round of calls on `d`, each checked to land on `d`'s device (`c:
/// None` when other threads use the device meanwhile: the totals are
/// checked at the end instead).
fn round(c: Option<&Control>, d: &AclDriver) {
    let before = c.map(|c| counts(c, d));
    let mem = d.alloc(64).unwrap();
    let stream = d.create_stream().unwrap();
    let event = d.create_event().unwrap();
    if let (Some(c), Some(before)) = (c, before) {
        assert_eq!(
            counts(c, d),
            (before.0 + 1, before.1 + 1, before.2 + 1),
            "device {}",
            d.device_id()
        );
    }
    d.memset_async(stream, mem, 3, 64).unwrap();
    d.record_event(event, stream).unwrap();
    d.sync_stream(stream, Duration::from_millis(100)).unwrap();
    let mut back = [0u8; 64];
    d.copy_from_device(&mut back, mem).unwrap();
    assert_eq!(back, [3; 64]);
    d.destroy_event(event).unwrap();
    d.destroy_stream(stream).unwrap();
    d.free(mem).unwrap();
}

fn two_devices_alternate(c: &Control, open: fn(&SimConfig, bool) -> AclDriver) {
    let a = open(&fast(), false);
    let sa = a.create_stream().unwrap();
    // Opening B binds B's device on this thread.
    let b = open(&fast(), false);
    let sb = b.create_stream().unwrap();
    assert_eq!(
        (
            c.stats(a.device_id()).streams_created,
            c.stats(b.device_id()).streams_created
        ),
        (1, 1)
    );
    for _ in 0..3 {
        a.query_stream(sa).expect("A's own stream, in A's context");
        round(Some(c), &a);
        b.query_stream(sb).expect("B's own stream, in B's context");
        round(Some(c), &b);
    }
    std::thread::scope(|scope| {
        for i in 0..4 {
            let (a, b) = (&a, &b);
            scope.spawn(move || {
                for _ in 0..3 {
                    if i % 2 == 0 {
                        round(None, a);
                        round(None, b);
                    } else {
                        round(None, b);
                        round(None, a);
                    }
                    a.query_stream(sa).unwrap();
                    b.query_stream(sb).unwrap();
                }
            });
        }
    });
    // 3 rounds here and 6 per thread, nothing crossed over.
    for d in [&a, &b] {
        let s = c.stats(d.device_id());
        assert_eq!(
            (s.allocations, s.frees),
            (15, 15),
            "device {}",
            d.device_id()
        );
        assert_eq!(s.streams_created, 16);
    }
    a.destroy_stream(sa).unwrap();
    b.destroy_stream(sb).unwrap();
}

#[test]
fn two_devices_used_alternately_with_the_context_api() {
    two_devices_alternate(&control(), open);
}

#[test]
fn two_devices_used_alternately_without_the_context_api() {
    two_devices_alternate(&control_lite(), open_lite);
}

type RawSetDevice = unsafe extern "C" fn(i32) -> i32;

#[test]
fn a_foreign_set_device_on_the_thread_does_not_move_the_driver() {
    // Another component of the process switches this thread to another
    // device behind the driver's back; with the context API the driver
    // notices and restores its own.
    let c = control();
    let a = open(&fast(), false);
    let other = common::acl::next_device();
    c.configure(
        other,
        &fake_acl::control::FakeConfig::from_sim(&fast(), false),
    );
    // SAFETY: the workspace's own fake library (loaded already); the type
    // matches aclrtSetDevice / aclrtResetDevice. The library is never
    // unloaded (the driver keeps it), so the copied pointers stay valid.
    let (set, reset) = unsafe {
        let l = libloading::Library::new(common::acl::lib_path("fake_acl").as_os_str()).unwrap();
        let set = *l.get::<RawSetDevice>("aclrtSetDevice").unwrap();
        let reset = *l.get::<RawSetDevice>("aclrtResetDevice").unwrap();
        std::mem::forget(l);
        (set, reset)
    };
    // SAFETY: plain integer argument.
    assert_eq!(unsafe { set(other) }, 0);
    round(Some(&c), &a);
    assert_eq!(
        c.stats(other).allocations,
        0,
        "nothing landed on the other device"
    );
    // SAFETY: plain integer argument; balances the set above.
    assert_eq!(unsafe { reset(other) }, 0);
}
