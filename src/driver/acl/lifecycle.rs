//! An [`AclDriver`]'s life: opening it (load, version check, `aclInit`,
//! binding, the op watchdog, the AICPU Run kernel), what it found there
//! (device, capabilities, version, libraries), and the drop that balances it.

use std::ffi::CString;
use std::path::Path;
use std::ptr::{null, null_mut};
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::call::{addr, handle};
use super::codes::ACL_ERROR_REPEAT_INITIALIZE;
use super::ffi::{RT_LOAD_BINARY_OPT_CPU_KERNEL_MODE, RtLoadBinaryConfig, RtLoadBinaryOption};
use super::load::{self, Api, Lib, LoadError};
use super::registry::{device_shared, keep_forever};
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
            (Ok(acl), Ok(rt)) => Api::resolve(acl, rt)?,
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
            ctx: 0,
            sets: AtomicU64::new(0),
            version,
            aicpu_bin: 0,
            aicpu_func: 0,
            aicpu_threads: config.aicpu_threads.max(1),
            max_block_dim: config.max_block_dim,
            watchdog: None,
            caps,
            ex_events,
            table: RwLock::new(Table::new(instance)),
        };
        // From here on, a failure drops `d`, whose `Drop` balances what was
        // done so far (resets, finalize reference).
        // SAFETY: aclInit accepts NULL for "no config file".
        let rc = unsafe { (d.api.acl_init)(null()) };
        if rc != 0 && rc != ACL_ERROR_REPEAT_INITIALIZE {
            return Err(d.fail(Op::Open, "aclInit", rc).into());
        }
        d.set_device(Op::Open)?;
        d.ctx = d.capture_context()?;
        if let (Some(w), Some(set)) = (config.op_watchdog, d.api.set_op_timeout) {
            let mut actual = 0u64;
            let us = u64::try_from(w.as_micros()).unwrap_or(u64::MAX);
            // SAFETY: `actual` is a valid out-pointer for the call.
            let rc = unsafe { set(us, &raw mut actual) };
            d.check(Op::Open, "aclrtSetOpExecuteTimeOutV2", rc)?;
            d.watchdog = Some(Duration::from_micros(actual.max(us)));
        }
        let mut option = RtLoadBinaryOption {
            option_id: RT_LOAD_BINARY_OPT_CPU_KERNEL_MODE,
            value: [0; 4],
        };
        let cfg = RtLoadBinaryConfig {
            options: &raw mut option,
            num_opt: 1,
        };
        let mut bin = null_mut();
        // SAFETY: `path` is a NUL-terminated string and `cfg` points at one
        // option, both alive for the call; `bin` is a valid out-pointer.
        let rc =
            unsafe { (d.api.binary_load_from_file)(path.as_ptr(), &raw const cfg, &raw mut bin) };
        d.check(Op::Open, "rtsBinaryLoadFromFile", rc)?;
        d.aicpu_bin = addr(bin);
        let mut f = null_mut();
        // SAFETY: `bin` came from rtsBinaryLoadFromFile; `func` is a
        // NUL-terminated string alive for the call; `f` a valid out-pointer.
        let rc = unsafe { (d.api.func_get_by_name)(bin, func.as_ptr(), &raw mut f) };
        d.check(Op::Open, "rtsFuncGetByName", rc)?;
        d.aicpu_func = addr(f);
        Ok(d)
    }

    /// Reads the ACL version where `aclrtGetVersion` exists and refuses one
    /// below [`AclVersion::MINIMUM`]. A runtime without the symbol, or whose
    /// call fails, is not checked here (the required `rts*` symbols already
    /// date it to CANN 8.5 or later).
    fn check_version(api: &Api) -> Result<Option<AclVersion>, OpenError> {
        let Some(get) = api.get_version else {
            return Ok(None);
        };
        let (mut major, mut minor, mut patch) = (0i32, 0i32, 0i32);
        // SAFETY: three valid out-pointers for the call; no other argument.
        let rc = unsafe { get(&raw mut major, &raw mut minor, &raw mut patch) };
        if rc != 0 {
            return Ok(None);
        }
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

    /// The optional features the loaded runtime offers.
    #[must_use]
    pub fn capabilities(&self) -> Capabilities {
        self.caps
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
        let code = std::mem::take(&mut self.write().code);
        for r in code {
            if bound {
                self.unregister(r);
            } else {
                keep_forever(r.image);
            }
        }
        if bound
            && let Some(unload) = self.api.binary_unload
            && self.aicpu_bin != 0
        {
            // SAFETY: the handle came from rtsBinaryLoadFromFile and is
            // unloaded once; `aicpu_func` (derived from it) is not used again.
            let _ = unsafe { unload(handle(self.aicpu_bin)) };
        }
        // One reset per successful set: the device's reference count
        // balances, whichever threads the sets were made on.
        for _ in 0..self.sets.load(Ordering::Acquire) {
            // SAFETY: plain integer argument.
            let _ = unsafe { (self.api.reset_device)(self.device) };
        }
        if let Some(fin) = self.api.finalize_reference {
            let mut refs = 0u64;
            // SAFETY: `refs` is a valid out-pointer.
            let _ = unsafe { fin(&raw mut refs) };
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
