//! `fake-acl` compiled without its optional symbols: the required ACL /
//! libruntime API only, so the acl driver's capability fallbacks can be
//! tested through a real `libloading` load. Same source, same behaviour.

#[path = "../../fake-acl/src/control.rs"]
#[allow(
    dead_code,
    reason = "the lite variant is driven through the full library's control types"
)]
mod control;
#[path = "../../fake-acl/src/fake/mod.rs"]
mod fake;
