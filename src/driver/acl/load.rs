//! Finding and loading the vendor libraries, and resolving their symbols
//! into a function-pointer table. Nothing here panics: every failure is a
//! [`LoadError`] that lists what was tried, with the loader's own message.
//!
//! # Never unloaded
//!
//! A library that loaded is kept loaded for the rest of the process, even
//! when the driver that loaded it is dropped or its other library failed to
//! load: the vendor runtime starts its own threads and registers thread-local
//! and `atexit` destructors, and unmapping its code under them would crash
//! the process after a safe `drop`. The handles are kept in a process-wide
//! registry (reachable, so not a leak to a leak checker), one per path.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use libloading::Library;

use super::ffi::{
    FnAclFinalizeReference, FnAclGetRecentErrMsg, FnAclInit, FnBinaryLoadFromFile, FnBinaryUnload,
    FnCaptureBegin, FnCaptureEnd, FnCaptureGetInfo, FnCreateEventWithFlag, FnCreateStream,
    FnDevBinaryUnRegister, FnEvent, FnEventElapsed, FnEventSyncTimeout, FnEventTimestamp,
    FnExceptionInfoField, FnExecuteAsync, FnFree, FnFuncGetByName, FnGetCurrentContext,
    FnGetDeviceCount, FnGetSocName, FnGetVersion, FnKernelLaunchWithHandleV2, FnLaunchCallback,
    FnLaunchCpuKernel, FnMalloc, FnMemcpy, FnMemcpyAsync, FnMemset, FnMemsetAsync, FnModelDestroy,
    FnProcessReport, FnQueryEventStatus, FnRecordEvent, FnRegisterAllKernel, FnSetCurrentContext,
    FnSetDevice, FnSetExceptionInfoCallback, FnSetOpTimeout, FnStream, FnStreamQuery,
    FnStreamSyncTimeout, FnStreamWaitEvent, FnSubscribeReport,
};

/// Which vendor library.
///
/// ```
/// use runclaim::driver::acl::Lib;
///
/// assert_eq!(Lib::Runtime.file_name(), "libruntime.so");
/// assert_eq!(Lib::AscendCl.file_names(), ["libascendcl.so", "libacl_rt.so"]);
/// assert_eq!(Lib::AscendCl.env_var(), "RUNCLAIM_LIBASCENDCL");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lib {
    /// The `acl*` / `aclrt*` API: `libascendcl.so`, or `libacl_rt.so` (its
    /// successor; CANN documents `libascendcl.so` as deprecated).
    AscendCl,
    /// `libruntime.so`: the `rt*` / `rts*` kernel API.
    Runtime,
}

impl Lib {
    /// The primary file name searched for.
    #[must_use]
    pub const fn file_name(self) -> &'static str {
        self.file_names()[0]
    }

    /// Every file name searched for, in order, in each directory.
    #[must_use]
    pub const fn file_names(self) -> &'static [&'static str] {
        match self {
            Lib::AscendCl => &["libascendcl.so", "libacl_rt.so"],
            Lib::Runtime => &["libruntime.so"],
        }
    }

    /// The override environment variable.
    #[must_use]
    pub const fn env_var(self) -> &'static str {
        match self {
            Lib::AscendCl => "RUNCLAIM_LIBASCENDCL",
            Lib::Runtime => "RUNCLAIM_LIBRUNTIME",
        }
    }
}

impl fmt::Display for Lib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.file_name())
    }
}

/// The default install roots, newest layout first: CANN 9 installs to
/// `/usr/local/Ascend/cann`, earlier releases to
/// `/usr/local/Ascend/ascend-toolkit/latest`.
pub const DEFAULT_ROOTS: [(&str, &str); 2] = [
    ("/usr/local/Ascend/cann", "default install"),
    ("/usr/local/Ascend/ascend-toolkit/latest", "default toolkit"),
];

/// One place a library was looked for, and why it did not load.
///
/// ```
/// use runclaim::driver::acl::{AclConfig, AclDriver, LoadError, OpenError};
///
/// let cfg = AclConfig::new(0, "op.json").libraries("/nowhere/libascendcl.so", "/nowhere/libruntime.so");
/// match AclDriver::open(cfg) {
///     Err(OpenError::Load(LoadError::Both { ascendcl, .. })) => match *ascendcl {
///         LoadError::ExplicitPath { attempt, .. } => {
///             assert_eq!((attempt.path.to_str(), attempt.source), (Some("/nowhere/libascendcl.so"), "explicit path"));
///             assert!(attempt.error.contains("No such file"), "the loader's own words: {}", attempt.error);
///         }
///         other => panic!("{other}"),
///     },
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// The path (or bare name) handed to the loader.
    pub path: PathBuf,
    /// Where the candidate came from (e.g. `"RUNCLAIM_LIBRUNTIME"`).
    pub source: &'static str,
    /// The loader's own message (`dlerror()`: "cannot open shared object
    /// file: No such file or directory", "invalid ELF header", …).
    pub error: String,
}

/// A required symbol a loaded library lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MissingSymbol {
    /// The C symbol.
    pub symbol: &'static str,
    /// Which library it belongs to.
    pub lib: Lib,
    /// The file that was loaded for that library (as handed to the loader).
    pub file: PathBuf,
}

impl fmt::Display for MissingSymbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in {} ({})",
            self.symbol,
            self.file.display(),
            self.lib
        )
    }
}

/// Why the runtime could not be loaded.
///
/// ```
/// use runclaim::driver::acl::{AclConfig, AclDriver, LoadError, OpenError};
///
/// // Both "libraries" resolve (libm), but export none of the runtime's symbols:
/// // every missing name is reported at once, with the file it was looked up in.
/// let cfg = AclConfig::new(0, "op.json").libraries("libm.so.6", "libm.so.6");
/// match AclDriver::open(cfg) {
///     Err(OpenError::Load(LoadError::MissingSymbols { missing })) => {
///         assert_eq!(missing.len(), AclDriver::symbols().0.len());
///         assert_eq!(missing[0].file.to_str(), Some("libm.so.6"));
///     }
///     Err(OpenError::Load(LoadError::Both { .. })) => {} // no libm here
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// No candidate path of a library loaded.
    #[error("{lib} not found; tried:{}", list_attempts(.attempts))]
    NotFound {
        /// The library.
        lib: Lib,
        /// Every candidate, in search order, with the loader's message.
        attempts: Vec<Attempt>,
    },
    /// The explicit path in [`AclConfig`](super::AclConfig) did not load.
    /// Nothing else was tried: an explicit choice is never silently
    /// replaced by another library.
    #[error(
        "{lib}: the explicit path {} did not load: {}; no other path was tried",
        .attempt.path.display(),
        .attempt.error
    )]
    ExplicitPath {
        /// The library.
        lib: Lib,
        /// The one attempt, with the loader's message.
        attempt: Attempt,
    },
    /// Neither library loaded; both failures.
    #[error("neither runtime library loaded:\n{ascendcl}\n{runtime}")]
    Both {
        /// Why `libascendcl.so` did not load.
        ascendcl: Box<LoadError>,
        /// Why `libruntime.so` did not load.
        runtime: Box<LoadError>,
    },
    /// Libraries loaded, but required symbols are missing (all are listed,
    /// each with the file it was looked up in).
    #[error("missing required symbols: {}", list_missing(.missing))]
    MissingSymbols {
        /// Every missing required symbol.
        missing: Vec<MissingSymbol>,
    },
}

fn list_attempts(a: &[Attempt]) -> String {
    use std::fmt::Write as _;
    a.iter().fold(String::new(), |mut s, t| {
        let _ = write!(s, "\n  {} ({}): {}", t.path.display(), t.source, t.error);
        s
    })
}

fn list_missing(m: &[MissingSymbol]) -> String {
    m.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The candidates for `lib`, in search order.
///
/// An explicit path is the only candidate. Otherwise: the override
/// environment variable; `$ASCEND_HOME_PATH` then `$ASCEND_TOOLKIT_HOME`
/// (`lib64`, `runtime/lib64`); the default install roots
/// ([`DEFAULT_ROOTS`]: `lib64`, `runtime/lib64`); the bare name (the system
/// loader's own search: `LD_LIBRARY_PATH`, `ld.so.cache`). In each directory
/// every name of [`Lib::file_names`] is tried in order.
#[must_use]
pub fn candidates(
    lib: Lib,
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<(PathBuf, &'static str)> {
    if let Some(p) = explicit {
        return vec![(p.to_path_buf(), "explicit path")];
    }
    let mut out = Vec::new();
    if let Some(p) = env(lib.env_var()) {
        out.push((PathBuf::from(p), lib.env_var()));
    }
    let mut dirs: Vec<(PathBuf, &'static str)> = Vec::new();
    for var in ["ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"] {
        if let Some(home) = env(var) {
            dirs.push((PathBuf::from(home), var));
        }
    }
    for (root, source) in DEFAULT_ROOTS {
        dirs.push((PathBuf::from(root), source));
    }
    for (root, source) in dirs {
        for sub in ["lib64", "runtime/lib64"] {
            for name in lib.file_names() {
                out.push((root.join(sub).join(name), source));
            }
        }
    }
    for name in lib.file_names() {
        out.push((PathBuf::from(name), "system loader"));
    }
    out
}

/// Every library this process loaded through [`open`], by the path handed
/// to the loader. Never emptied: see the module documentation.
static LOADED: Mutex<Vec<(PathBuf, &'static Library)>> = Mutex::new(Vec::new());

/// The loader's own words for a failed `dlopen`: libloading 0.9 keeps the
/// `dlerror()` text in the error's `source()`; its `Display` only says
/// "dlopen failed".
fn loader_message(e: &libloading::Error) -> String {
    std::error::Error::source(e).map_or_else(|| e.to_string(), ToString::to_string)
}

/// Loads `path` once per process and keeps it loaded for good.
fn load_forever(path: &Path) -> Result<&'static Library, String> {
    let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&(_, lib)) = loaded.iter().find(|(p, _)| p == path) {
        return Ok(lib);
    }
    // SAFETY: loading a shared library runs its initialisers; unloading
    // would run its terminators. The candidates are the user's explicit
    // choice, their override variable, the vendor toolkit's install
    // directories, or what the system loader resolves for the vendor's
    // library names — exactly the code this driver exists to call, whose
    // initialisers expect to be loaded by an application. Unloading is never
    // done: the library is leaked into `LOADED` below, so its terminators
    // never run while its own threads or destructors might still execute,
    // and every function pointer resolved from it stays valid for the rest
    // of the process.
    let lib = unsafe { Library::new(path.as_os_str()) }.map_err(|e| loader_message(&e))?;
    let lib: &'static Library = Box::leak(Box::new(lib));
    loaded.push((path.to_path_buf(), lib));
    Ok(lib)
}

/// A library that loaded: where from, and the (never unloaded) handle.
pub(crate) struct Loaded {
    lib: &'static Library,
    path: PathBuf,
}

/// Loads the first candidate that loads.
///
/// # Errors
/// [`LoadError::ExplicitPath`] when an explicit path fails (nothing else is
/// tried); [`LoadError::NotFound`] listing every candidate and the loader's
/// message otherwise.
pub(crate) fn open(
    lib: Lib,
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Loaded, LoadError> {
    let mut attempts = Vec::new();
    for (path, source) in candidates(lib, explicit, env) {
        match load_forever(&path) {
            Ok(l) => return Ok(Loaded { lib: l, path }),
            Err(error) => attempts.push(Attempt {
                path,
                source,
                error,
            }),
        }
    }
    match (explicit, attempts.pop()) {
        (Some(_), Some(attempt)) => Err(LoadError::ExplicitPath { lib, attempt }),
        (_, last) => {
            attempts.extend(last);
            Err(LoadError::NotFound { lib, attempts })
        }
    }
}

/// Resolves one symbol; `None` (and the name recorded in `missing`) when the
/// library does not export it.
///
/// # Safety
/// `T` must be the function-pointer type of the symbol's C prototype.
unsafe fn sym<T: Copy>(
    loaded: &Loaded,
    name: &'static str,
    missing: &mut Vec<MissingSymbol>,
    which: Lib,
) -> Option<T> {
    // SAFETY: the caller guarantees `T` matches the C prototype. The pointer
    // is copied out of the `Symbol`: the library is never unloaded
    // (`load_forever`), so it stays valid for the rest of the process.
    if let Ok(s) = unsafe { loaded.lib.get::<T>(name.as_bytes()) } {
        Some(*s)
    } else {
        missing.push(MissingSymbol {
            symbol: name,
            lib: which,
            file: loaded.path.clone(),
        });
        None
    }
}

macro_rules! api_table {
    (
        required { $($rf:ident: $rt:ty = $rlib:ident $rname:literal;)* }
        optional { $($of:ident: $ot:ty = $olib:ident $oname:literal;)* }
    ) => {
        /// The resolved function-pointer table. The libraries behind it are
        /// never unloaded, so every pointer in it stays valid for the rest of
        /// the process. No logic.
        pub(crate) struct Api {
            $(pub $rf: $rt,)*
            $(pub $of: Option<$ot>,)*
            pub ascendcl_path: PathBuf,
            pub runtime_path: PathBuf,
        }

        impl Api {
            /// Every required symbol name, for documentation and tests.
            pub const REQUIRED: &'static [&'static str] = &[$($rname),*];
            /// Every optional symbol name.
            pub const OPTIONAL: &'static [&'static str] = &[$($oname),*];

            /// Resolves every symbol; all missing required names are
            /// reported together.
            pub fn resolve(ascendcl: Loaded, runtime: Loaded) -> Result<Self, LoadError> {
                let mut missing = Vec::new();
                let lib = |l: Lib| if l == Lib::AscendCl { &ascendcl } else { &runtime };
                $(
                    // SAFETY: the type is the symbol's C prototype, as
                    // `acl/acl_rt.h` and the `runtime/` headers declare it.
                    let $rf = unsafe { sym::<$rt>(lib(Lib::$rlib), $rname, &mut missing, Lib::$rlib) };
                )*
                let mut ignored = Vec::new();
                $(
                    // SAFETY: the type is the symbol's C prototype, as
                    // `acl/acl_rt.h` and the `runtime/` headers declare it.
                    let $of = unsafe { sym::<$ot>(lib(Lib::$olib), $oname, &mut ignored, Lib::$olib) };
                )*
                if !missing.is_empty() {
                    return Err(LoadError::MissingSymbols { missing });
                }
                match ($($rf,)*) {
                    ($(Some($rf),)*) => Ok(Api {
                        $($rf,)*
                        $($of,)*
                        ascendcl_path: ascendcl.path,
                        runtime_path: runtime.path,
                    }),
                    // Unreachable: `missing` was empty, so every symbol resolved.
                    _ => Err(LoadError::MissingSymbols { missing }),
                }
            }

            /// The optional symbols that resolved.
            pub fn present_optional(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(if self.$of.is_some() { out.push($oname); })*
                out
            }
        }
    };
}

api_table! {
    required {
        acl_init: FnAclInit = AscendCl "aclInit";
        set_device: FnSetDevice = AscendCl "aclrtSetDevice";
        reset_device: FnSetDevice = AscendCl "aclrtResetDevice";
        malloc: FnMalloc = AscendCl "aclrtMalloc";
        free: FnFree = AscendCl "aclrtFree";
        memcpy: FnMemcpy = AscendCl "aclrtMemcpy";
        memcpy_async: FnMemcpyAsync = AscendCl "aclrtMemcpyAsync";
        memset: FnMemset = AscendCl "aclrtMemset";
        memset_async: FnMemsetAsync = AscendCl "aclrtMemsetAsync";
        create_stream: FnCreateStream = AscendCl "aclrtCreateStream";
        destroy_stream: FnStream = AscendCl "aclrtDestroyStream";
        stream_query: FnStreamQuery = AscendCl "aclrtStreamQuery";
        stream_sync_timeout: FnStreamSyncTimeout = AscendCl "aclrtSynchronizeStreamWithTimeout";
        create_event: FnCreateEventWithFlag = AscendCl "aclrtCreateEventWithFlag";
        destroy_event: FnEvent = AscendCl "aclrtDestroyEvent";
        record_event: FnRecordEvent = AscendCl "aclrtRecordEvent";
        query_event_status: FnQueryEventStatus = AscendCl "aclrtQueryEventStatus";
        stream_wait_event: FnStreamWaitEvent = AscendCl "aclrtStreamWaitEvent";
        event_elapsed: FnEventElapsed = AscendCl "aclrtEventElapsedTime";
        register_all_kernel: FnRegisterAllKernel = Runtime "rtRegisterAllKernel";
        kernel_launch_v2: FnKernelLaunchWithHandleV2 = Runtime "rtKernelLaunchWithHandleV2";
        binary_load_from_file: FnBinaryLoadFromFile = Runtime "rtsBinaryLoadFromFile";
        func_get_by_name: FnFuncGetByName = Runtime "rtsFuncGetByName";
        launch_cpu_kernel: FnLaunchCpuKernel = Runtime "rtsLaunchCpuKernel";
    }
    optional {
        event_sync_timeout: FnEventSyncTimeout = AscendCl "aclrtSynchronizeEventWithTimeout";
        event_timestamp: FnEventTimestamp = AscendCl "aclrtEventGetTimestamp";
        recent_err_msg: FnAclGetRecentErrMsg = AscendCl "aclGetRecentErrMsg";
        set_op_timeout: FnSetOpTimeout = AscendCl "aclrtSetOpExecuteTimeOutV2";
        destroy_stream_force: FnStream = AscendCl "aclrtDestroyStreamForce";
        finalize_reference: FnAclFinalizeReference = AscendCl "aclFinalizeReference";
        create_event_ex: FnCreateEventWithFlag = AscendCl "aclrtCreateEventExWithFlag";
        get_current_context: FnGetCurrentContext = AscendCl "aclrtGetCurrentContext";
        set_current_context: FnSetCurrentContext = AscendCl "aclrtSetCurrentContext";
        get_version: FnGetVersion = AscendCl "aclrtGetVersion";
        // Read by the runtime check only (`probe`).
        get_device_count: FnGetDeviceCount = AscendCl "aclrtGetDeviceCount";
        get_soc_name: FnGetSocName = AscendCl "aclrtGetSocName";
        binary_unload: FnBinaryUnload = Runtime "rtsBinaryUnload";
        dev_binary_unregister: FnDevBinaryUnRegister = Runtime "rtDevBinaryUnRegister";
        subscribe_report: FnSubscribeReport = AscendCl "aclrtSubscribeReport";
        unsubscribe_report: FnSubscribeReport = AscendCl "aclrtUnSubscribeReport";
        process_report: FnProcessReport = AscendCl "aclrtProcessReport";
        launch_callback: FnLaunchCallback = AscendCl "aclrtLaunchCallback";
        set_exception_info_callback: FnSetExceptionInfoCallback = AscendCl "aclrtSetExceptionInfoCallback";
        exception_device_id: FnExceptionInfoField = AscendCl "aclrtGetDeviceIdFromExceptionInfo";
        // Stream capture: all five, or none of it (`Capabilities::CAPTURE`).
        capture_begin: FnCaptureBegin = AscendCl "aclmdlRICaptureBegin";
        capture_get_info: FnCaptureGetInfo = AscendCl "aclmdlRICaptureGetInfo";
        capture_end: FnCaptureEnd = AscendCl "aclmdlRICaptureEnd";
        execute_async: FnExecuteAsync = AscendCl "aclmdlRIExecuteAsync";
        model_destroy: FnModelDestroy = AscendCl "aclmdlRIDestroy";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order_is_env_homes_default_roots_bare() {
        let env = |k: &str| match k {
            "RUNCLAIM_LIBRUNTIME" => Some(OsString::from("/over/libruntime.so")),
            "ASCEND_HOME_PATH" => Some(OsString::from("/home/ascend")),
            _ => None,
        };
        let c: Vec<_> = candidates(Lib::Runtime, None, &env)
            .into_iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        assert_eq!(
            c,
            [
                "/over/libruntime.so",
                "/home/ascend/lib64/libruntime.so",
                "/home/ascend/runtime/lib64/libruntime.so",
                "/usr/local/Ascend/cann/lib64/libruntime.so",
                "/usr/local/Ascend/cann/runtime/lib64/libruntime.so",
                "/usr/local/Ascend/ascend-toolkit/latest/lib64/libruntime.so",
                "/usr/local/Ascend/ascend-toolkit/latest/runtime/lib64/libruntime.so",
                "libruntime.so",
            ]
        );
    }

    #[test]
    fn ascendcl_falls_back_to_libacl_rt_in_every_place() {
        let env = |_: &str| None;
        let c: Vec<_> = candidates(Lib::AscendCl, None, &env)
            .into_iter()
            .map(|(p, s)| format!("{} ({s})", p.display()))
            .collect();
        assert_eq!(
            c,
            [
                "/usr/local/Ascend/cann/lib64/libascendcl.so (default install)",
                "/usr/local/Ascend/cann/lib64/libacl_rt.so (default install)",
                "/usr/local/Ascend/cann/runtime/lib64/libascendcl.so (default install)",
                "/usr/local/Ascend/cann/runtime/lib64/libacl_rt.so (default install)",
                "/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so (default toolkit)",
                "/usr/local/Ascend/ascend-toolkit/latest/lib64/libacl_rt.so (default toolkit)",
                "/usr/local/Ascend/ascend-toolkit/latest/runtime/lib64/libascendcl.so (default toolkit)",
                "/usr/local/Ascend/ascend-toolkit/latest/runtime/lib64/libacl_rt.so (default toolkit)",
                "libascendcl.so (system loader)",
                "libacl_rt.so (system loader)",
            ]
        );
    }

    #[test]
    fn an_explicit_path_is_the_only_candidate() {
        let env = |_: &str| Some(OsString::from("/from/env"));
        let c = candidates(Lib::Runtime, Some(Path::new("/x/librt.so")), &env);
        assert_eq!(c, [(PathBuf::from("/x/librt.so"), "explicit path")]);
    }

    #[test]
    fn a_failed_explicit_path_is_an_error_with_the_loaders_words() {
        let env = |_: &str| Some(OsString::from("/from/env/libascendcl.so"));
        let err = open(
            Lib::AscendCl,
            Some(Path::new("/nonexistent/libascendcl.so")),
            &env,
        )
        .map(|_| ())
        .unwrap_err();
        let LoadError::ExplicitPath { lib, attempt } = &err else {
            panic!("{err}");
        };
        assert_eq!(*lib, Lib::AscendCl);
        assert_eq!(attempt.source, "explicit path");
        assert!(
            attempt
                .error
                .contains("cannot open shared object file: No such file or directory"),
            "{}",
            attempt.error
        );
        assert!(!err.to_string().contains("/from/env"), "{err}");
    }

    #[test]
    fn not_found_lists_every_attempt_with_the_loader_message() {
        let env = |_: &str| None;
        let err = open(Lib::Runtime, None, &env).map(|_| ()).unwrap_err();
        let LoadError::NotFound { lib, attempts } = &err else {
            panic!("{err}");
        };
        assert_eq!(*lib, Lib::Runtime);
        assert_eq!(attempts.len(), 5, "four default paths and the bare name");
        assert!(attempts.iter().all(|a| a.error.contains("libruntime.so")));
        assert!(attempts.iter().all(|a| !a.error.contains("dlopen failed")));
        let msg = err.to_string();
        assert!(msg.contains("libruntime.so (system loader)"), "{msg}");
    }
}
