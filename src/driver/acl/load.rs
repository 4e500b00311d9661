//! Finding and loading the vendor libraries, and resolving their symbols
//! into a function-pointer table. Nothing here panics: every failure is a
//! [`LoadError`] that lists what was tried.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use libloading::Library;

use super::ffi::{
    FnAclFinalizeReference, FnAclGetRecentErrMsg, FnAclInit, FnBinaryLoadFromFile, FnBinaryUnload,
    FnCreateEventWithFlag, FnCreateStream, FnEvent, FnEventElapsed, FnEventSyncTimeout,
    FnEventTimestamp, FnFree, FnFuncGetByName, FnKernelLaunchWithHandleV2, FnLaunchCpuKernel,
    FnMalloc, FnMemcpy, FnMemcpyAsync, FnMemset, FnMemsetAsync, FnQueryEventStatus, FnRecordEvent,
    FnRegisterAllKernel, FnSetDevice, FnSetOpTimeout, FnStream, FnStreamQuery, FnStreamSyncTimeout,
    FnStreamWaitEvent,
};

/// Which vendor library.
///
/// ```
/// use runclaim::driver::acl::Lib;
///
/// assert_eq!(Lib::Runtime.file_name(), "libruntime.so");
/// assert_eq!(Lib::AscendCl.env_var(), "RUNCLAIM_LIBASCENDCL");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lib {
    /// `libascendcl.so`: the `acl*` / `aclrt*` API.
    AscendCl,
    /// `libruntime.so`: the `rt*` / `rts*` kernel API.
    Runtime,
}

impl Lib {
    /// The file name searched for.
    #[must_use]
    pub const fn file_name(self) -> &'static str {
        match self {
            Lib::AscendCl => "libascendcl.so",
            Lib::Runtime => "libruntime.so",
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

/// One place a library was looked for, and why it did not load.
///
/// ```
/// use runclaim::driver::acl::{AclConfig, AclDriver, LoadError, OpenError};
///
/// let cfg = AclConfig::new(0, "op.json").libraries("/nowhere/libascendcl.so", "/nowhere/libruntime.so");
/// if let Err(OpenError::Load(LoadError::NotFound { attempts, .. })) = AclDriver::open(cfg) {
///     let first = &attempts[0];
///     assert_eq!((first.path.to_str(), first.source), (Some("/nowhere/libascendcl.so"), "explicit path"));
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The path (or bare name) handed to the loader.
    pub path: PathBuf,
    /// Where the candidate came from (e.g. `"RUNCLAIM_LIBRUNTIME"`).
    pub source: &'static str,
    /// The loader's message.
    pub error: String,
}

/// Why the runtime could not be loaded.
///
/// ```
/// use runclaim::driver::acl::{AclConfig, AclDriver, LoadError, OpenError};
///
/// // Both "libraries" resolve (libm), but export none of the runtime's symbols:
/// // every missing name is reported at once.
/// let cfg = AclConfig::new(0, "op.json").libraries("libm.so.6", "libm.so.6");
/// match AclDriver::open(cfg) {
///     Err(OpenError::Load(LoadError::MissingSymbols { missing })) => {
///         assert_eq!(missing.len(), AclDriver::symbols().0.len());
///     }
///     Err(OpenError::Load(LoadError::NotFound { .. })) => {} // no libm here
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
    /// Libraries loaded, but required symbols are missing (all are listed).
    #[error("missing required symbols: {}", .missing.join(", "))]
    MissingSymbols {
        /// Every missing required symbol, with the library it was looked up in.
        missing: Vec<String>,
    },
}

fn list_attempts(a: &[Attempt]) -> String {
    use std::fmt::Write as _;
    a.iter().fold(String::new(), |mut s, t| {
        let _ = write!(s, "\n  {} ({}): {}", t.path.display(), t.source, t.error);
        s
    })
}

/// The candidates for `lib`, in search order: the explicit path, the override
/// environment variable, `$ASCEND_HOME_PATH` and `$ASCEND_TOOLKIT_HOME`
/// (`lib64`, `runtime/lib64`), the default toolkit install, the bare name
/// (the system loader's own search: `LD_LIBRARY_PATH`, `ld.so.cache`).
#[must_use]
pub fn candidates(
    lib: Lib,
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<(PathBuf, &'static str)> {
    let name = lib.file_name();
    let mut out = Vec::new();
    if let Some(p) = explicit {
        out.push((p.to_path_buf(), "explicit path"));
    }
    if let Some(p) = env(lib.env_var()) {
        out.push((PathBuf::from(p), lib.env_var()));
    }
    for var in ["ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"] {
        if let Some(home) = env(var) {
            let home = PathBuf::from(home);
            out.push((home.join("lib64").join(name), var));
            out.push((home.join("runtime/lib64").join(name), var));
        }
    }
    let toolkit = Path::new("/usr/local/Ascend/ascend-toolkit/latest");
    out.push((toolkit.join("lib64").join(name), "default toolkit"));
    out.push((toolkit.join("runtime/lib64").join(name), "default toolkit"));
    out.push((PathBuf::from(name), "system loader"));
    out
}

/// Loads the first candidate that loads.
///
/// # Errors
/// [`LoadError::NotFound`] listing every candidate and the loader's message.
pub fn open(
    lib: Lib,
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<(Library, PathBuf), LoadError> {
    let mut attempts = Vec::new();
    for (path, source) in candidates(lib, explicit, env) {
        // SAFETY: loading a shared library runs its initialisers. The
        // candidates are the user's explicit choice, their override
        // variable, the vendor toolkit's install directories, or what the
        // system loader resolves for the vendor's library name — exactly the
        // code this driver exists to call.
        match unsafe { Library::new(path.as_os_str()) } {
            Ok(l) => return Ok((l, path)),
            Err(e) => attempts.push(Attempt {
                path,
                source,
                error: e.to_string(),
            }),
        }
    }
    Err(LoadError::NotFound { lib, attempts })
}

/// Resolves one symbol; `None` (and the name recorded in `missing`) when the
/// library does not export it.
///
/// # Safety
/// `T` must be the function-pointer type of the symbol's C prototype.
unsafe fn sym<T: Copy>(
    lib: &Library,
    name: &str,
    missing: &mut Vec<String>,
    which: Lib,
) -> Option<T> {
    // SAFETY: the caller guarantees `T` matches the C prototype; the pointer
    // is copied out of the `Symbol` and used only while the table that owns
    // `lib` is alive.
    if let Ok(s) = unsafe { lib.get::<T>(name) } {
        Some(*s)
    } else {
        missing.push(format!("{name} ({which})"));
        None
    }
}

macro_rules! api_table {
    (
        required { $($rf:ident: $rt:ty = $rlib:ident $rname:literal;)* }
        optional { $($of:ident: $ot:ty = $olib:ident $oname:literal;)* }
    ) => {
        /// The resolved function-pointer table. It owns both libraries, so
        /// no pointer in it can outlive the code it points to. No logic.
        pub(crate) struct Api {
            $(pub $rf: $rt,)*
            $(pub $of: Option<$ot>,)*
            pub ascendcl_path: PathBuf,
            pub runtime_path: PathBuf,
            // Declared last: dropped after every pointer above is gone.
            _ascendcl: Library,
            _runtime: Library,
        }

        impl Api {
            /// Every required symbol name, for documentation and tests.
            pub const REQUIRED: &'static [&'static str] = &[$($rname),*];
            /// Every optional symbol name.
            pub const OPTIONAL: &'static [&'static str] = &[$($oname),*];

            /// Resolves every symbol; all missing required names are
            /// reported together.
            pub fn resolve(
                ascendcl: (Library, PathBuf),
                runtime: (Library, PathBuf),
            ) -> Result<Self, LoadError> {
                let mut missing = Vec::new();
                let lib = |l: Lib| if l == Lib::AscendCl { &ascendcl.0 } else { &runtime.0 };
                $(
                    // SAFETY: the type is the prototype from acl-abi.md §3/§4.
                    let $rf = unsafe { sym::<$rt>(lib(Lib::$rlib), $rname, &mut missing, Lib::$rlib) };
                )*
                let mut ignored = Vec::new();
                $(
                    // SAFETY: the type is the prototype from acl-abi.md §3.
                    let $of = unsafe { sym::<$ot>(lib(Lib::$olib), $oname, &mut ignored, Lib::$olib) };
                )*
                if !missing.is_empty() {
                    return Err(LoadError::MissingSymbols { missing });
                }
                match ($($rf,)*) {
                    ($(Some($rf),)*) => Ok(Api {
                        $($rf,)*
                        $($of,)*
                        ascendcl_path: ascendcl.1,
                        runtime_path: runtime.1,
                        _ascendcl: ascendcl.0,
                        _runtime: runtime.0,
                    }),
                    // Unreachable: `missing` was empty, so every symbol resolved.
                    _ => Err(LoadError::MissingSymbols { missing }),
                }
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
        binary_unload: FnBinaryUnload = Runtime "rtsBinaryUnload";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order_is_explicit_env_toolkit_bare() {
        let env = |k: &str| match k {
            "RUNCLAIM_LIBRUNTIME" => Some(OsString::from("/over/libruntime.so")),
            "ASCEND_HOME_PATH" => Some(OsString::from("/home/ascend")),
            _ => None,
        };
        let c: Vec<_> = candidates(Lib::Runtime, Some(Path::new("/x/librt.so")), &env)
            .into_iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        assert_eq!(
            c,
            [
                "/x/librt.so",
                "/over/libruntime.so",
                "/home/ascend/lib64/libruntime.so",
                "/home/ascend/runtime/lib64/libruntime.so",
                "/usr/local/Ascend/ascend-toolkit/latest/lib64/libruntime.so",
                "/usr/local/Ascend/ascend-toolkit/latest/runtime/lib64/libruntime.so",
                "libruntime.so",
            ]
        );
    }

    #[test]
    fn not_found_lists_every_attempt_with_the_loader_message() {
        let env = |_: &str| None;
        let err = open(
            Lib::AscendCl,
            Some(Path::new("/nonexistent/libascendcl.so")),
            &env,
        )
        .map(|_| ())
        .unwrap_err();
        let LoadError::NotFound { lib, attempts } = &err else {
            panic!("{err}");
        };
        assert_eq!(*lib, Lib::AscendCl);
        assert_eq!(attempts.len(), 4, "explicit, two toolkit paths, bare name");
        assert!(attempts.iter().all(|a| !a.error.is_empty()));
        let msg = err.to_string();
        assert!(
            msg.contains("/nonexistent/libascendcl.so (explicit path)"),
            "{msg}"
        );
        assert!(msg.contains("libascendcl.so (system loader)"), "{msg}");
    }
}
