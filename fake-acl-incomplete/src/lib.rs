//! `fake-acl` compiled without one required symbol (`aclrtStreamWaitEvent`):
//! loading it must fail with exactly that name, through a real `libloading`
//! load. Same source as `fake-acl`.

#[path = "../../fake-acl/src/control.rs"]
#[allow(
    dead_code,
    reason = "the incomplete variant is never loaded far enough to be driven"
)]
mod control;
#[path = "../../fake-acl/src/fake/mod.rs"]
mod fake;
