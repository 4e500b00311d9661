//! An [`AclDriver`]'s life: opening it (load, version check, `aclInit`,
//! binding, the op watchdog, the AICPU Run kernel), what it found there
//! (device, capabilities, version, libraries), and the drop that balances it.

use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::load::{self, Api, Lib, LoadError};
use super::registry::device_shared;
use super::result;
use super::table::Table;
use super::{AclConfig, AclDriver, AclVersion, OpenError};
use crate::driver::{Capabilities, Op};

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

impl AclDriver {
    /// Loads the runtime, checks its version (where `aclrtGetVersion`
    /// exists), initializes ACL (`aclInit`; a repeated init is fine), binds
    /// the device on this thread, applies the op watchdog if configured, and
    /// loads the AICPU Run kernel.
    ///
    /// # Errors
    /// [`OpenError::Load`] with every path tried or every missing symbol;
    /// [`OpenError::UnsupportedVersion`] below ACL 1.16;
    /// [`OpenError::Runtime`] when a set-up call fails.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "configurations are built inline and handed over, like std's builders"
    )]
    pub fn open(config: AclConfig) -> Result<Self, OpenError> {
        let env = |k: &str| std::env::var_os(k);
        let acl = load::open(Lib::AscendCl, config.ascendcl.as_deref(), &env);
        let rt = load::open(Lib::Runtime, config.runtime.as_deref(), &env);
        let api = match (acl, rt) {
            (Ok(acl), Ok(rt)) => Arc::new(Api::resolve(acl, rt)?),
            (Err(a), Err(r)) => {
                return Err(LoadError::Both {
                    ascendcl: Box::new(a),
                    runtime: Box::new(r),
                }
                .into());
            }
            (Err(e), Ok(_)) | (Ok(_), Err(e)) => return Err(e.into()),
        };
        let version = Self::check_version(&api)?;
        let caps = Self::capabilities_of(&api);
        let path = config
            .aicpu_binary
            .to_str()
            .and_then(|p| CString::new(p).ok())
            .ok_or(OpenError::BadString("aicpu_binary"))?;
        let func = CString::new(config.aicpu_function.as_str())
            .map_err(|_| OpenError::BadString("aicpu_function"))?;
        let ex_events = AtomicBool::new(api.create_event_ex.is_some());
        let instance = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
        let mut d = AclDriver {
            api,
            instance,
            device: config.device_id,
            shared: device_shared(config.device_id),
            ctx: None,
            sets: AtomicU64::new(0),
            version,
            aicpu: None,
            initialized: false,
            aicpu_threads: config.aicpu_threads.max(1),
            max_block_dim: config.max_block_dim,
            watchdog: None,
            reactor_wait: config.reactor_wait(),
            caps,
            ex_events,
            table: RwLock::new(Table::default()),
        };
        // Counted from here: the drop balances it.
        d.shared.notify.driver_opened();
        // From here on, a failure drops `d`, whose `Drop` balances what was
        // done so far (resets, finalize reference).
        let open = |f: result::Failed| OpenError::from(f.at(Op::Open));
        result::init(&d.api).map_err(open)?;
        d.initialized = true;
        d.set_device(Op::Open)?;
        d.ctx = d.capture_context()?;
        if let Some(w) = config.op_watchdog {
            let us = u64::try_from(w.as_micros()).unwrap_or(u64::MAX);
            if let Some(actual) = result::set_op_execute_timeout(&d.api, us) {
                let actual = actual.map_err(open)?;
                d.watchdog = Some(Duration::from_micros(actual.max(us)));
            }
        }
        let bin = result::binary_load_from_file(&d.api, &path).map_err(open)?;
        match result::func_get_by_name(&d.api, bin, &func) {
            Ok(k) => d.aicpu = Some(k),
            Err((bin, e)) => {
                let _ = result::binary_unload(&d.api, bin);
                return Err(open(e));
            }
        }
        Ok(d)
    }

    /// What the resolved symbols offer (the optional calls found).
    fn capabilities_of(api: &Api) -> Capabilities {
        let mut caps = Capabilities::empty();
        caps.set(
            Capabilities::EVENT_SYNC_TIMEOUT,
            api.event_sync_timeout.is_some(),
        );
        caps.set(Capabilities::EVENT_TIMESTAMP, api.event_timestamp.is_some());
        caps.set(Capabilities::ERROR_MESSAGE, api.recent_err_msg.is_some());
        caps.set(Capabilities::WATCHDOG_CONTROL, api.set_op_timeout.is_some());
        caps.set(
            Capabilities::FORCE_DESTROY,
            api.destroy_stream_force.is_some(),
        );
        // Capture needs all five calls, and events a capture accepts: the
        // runtime refuses an event made by `aclrtCreateEventWithFlag` ("old
        // mode") in a capture, recorded or waited on (`ApiImpl::EventRecord`
        // and `ApiImpl::StreamWaitEvent`, `src/runtime/api/impl/api_impl.cc`
        // of hicann/runtime: `RT_ERROR_FEATURE_NOT_SUPPORT` unless
        // `IsNewMode()`), and takes an `aclrtCreateEventExWithFlag` one
        // whose flags hold `ACL_EVENT_SYNC` (`RT_EVENT_DDSYNC_NS`), as this
        // driver's `ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE` do
        // (`IsEventWithoutWaitTask()`, `src/runtime/core/inc/event/event.hpp`,
        // is false for them; `ACL_EVENT_TIME_LINE` is not checked). So
        // without the new call, no capture; `capabilities()` also drops it
        // if the call turns out refused.
        caps.set(
            Capabilities::CAPTURE,
            api.capture_begin.is_some()
                && api.capture_get_info.is_some()
                && api.capture_end.is_some()
                && api.execute_async.is_some()
                && api.model_destroy.is_some()
                && api.create_event_ex.is_some(),
        );
        caps
    }

    /// Reads the ACL version where `aclrtGetVersion` exists and refuses one
    /// below [`AclVersion::MINIMUM`]. A runtime without the symbol, or whose
    /// call fails, is not checked here (the required `rts*` symbols already
    /// date it to CANN 8.5 or later).
    fn check_version(api: &Api) -> Result<Option<AclVersion>, OpenError> {
        let Some(Ok((major, minor, patch))) = result::get_version(api) else {
            return Ok(None);
        };
        let found = AclVersion::new(major, minor, patch);
        if found < AclVersion::MINIMUM {
            return Err(OpenError::UnsupportedVersion {
                found,
                required: AclVersion::MINIMUM,
                library: api.ascendcl_path.clone(),
            });
        }
        Ok(Some(found))
    }

    /// The device id.
    #[must_use]
    pub fn device_id(&self) -> i32 {
        self.device
    }

    /// The optional features the loaded runtime offers. Stream capture
    /// ([`Capabilities::CAPTURE`]) needs the five `aclmdlRI*` calls and
    /// events from `aclrtCreateEventExWithFlag`: it is gone once the driver
    /// fell back to `aclrtCreateEventWithFlag` (a runtime that exports the
    /// new call but refuses it).
    #[must_use]
    pub fn capabilities(&self) -> Capabilities {
        let mut caps = self.caps;
        if !self.can_capture() {
            caps.remove(Capabilities::CAPTURE);
        }
        caps
    }

    /// The ACL version the runtime reported (`None` without
    /// `aclrtGetVersion`).
    #[must_use]
    pub fn acl_version(&self) -> Option<AclVersion> {
        self.version
    }

    /// The optional symbols the loaded runtime exports.
    #[must_use]
    pub fn optional_symbols(&self) -> Vec<&'static str> {
        self.api.present_optional()
    }

    /// Where the two libraries were loaded from.
    #[must_use]
    pub fn library_paths(&self) -> (&Path, &Path) {
        (&self.api.ascendcl_path, &self.api.runtime_path)
    }

    /// Names of the required and optional symbols.
    #[must_use]
    pub fn symbols() -> (&'static [&'static str], &'static [&'static str]) {
        (load::Api::REQUIRED, load::Api::OPTIONAL)
    }
}

impl Drop for AclDriver {
    fn drop(&mut self) {
        // Best effort, errors ignored: a drop cannot report them, and
        // nothing here panics (the table lock is poison-tolerant, the
        // thread-local has no destructor).
        let bound = self.bind(Op::Open).is_ok();
        // Its graphs first, while a replay's callbacks can still be
        // delivered (unbound, the device's reset releases them).
        if bound {
            self.destroy_graphs();
        }
        // The last driver of the device ends its callback reactor (bounded;
        // see `notify`), before any reset.
        self.shared.notify.driver_closed(bound);
        let code = std::mem::take(&mut self.write().code);
        for r in code {
            if bound {
                self.unregister(r);
            } else {
                r.program.keep_forever();
            }
        }
        if bound && let Some(k) = self.aicpu.take() {
            let _ = result::binary_unload(&self.api, k.into_binary());
        }
        // One reset per successful set: the device's reference count
        // balances, whichever threads the sets were made on.
        for _ in 0..self.sets.load(Ordering::Acquire) {
            // SAFETY: each reset gives up one of this driver's own sets;
            // nothing of this driver is used after the last (its streams,
            // events and memory are never touched again: it is being dropped).
            let _ = unsafe { result::reset_device(&self.api, self.device) };
        }
        if self.initialized {
            // SAFETY: gives up the reference this driver's `aclInit` took;
            // the driver makes no call afterwards.
            let _ = unsafe { result::finalize_reference(&self.api) };
        }
        // The libraries stay loaded (see `load`): the runtime's own threads
        // and destructors may still run after this.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_libraries_are_reported_not_panicked() {
        let cfg = AclConfig::new(0, "/nonexistent.json")
            .libraries("/nonexistent/a.so", "/nonexistent/b.so");
        match AclDriver::open(cfg) {
            Err(OpenError::Load(LoadError::Both { ascendcl, runtime })) => {
                assert!(matches!(*ascendcl, LoadError::ExplicitPath { .. }));
                assert!(matches!(*runtime, LoadError::ExplicitPath { .. }));
            }
            other => panic!("expected both explicit paths to fail, got {other:?}"),
        }
    }
}
