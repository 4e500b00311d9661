//! The callback entry points' refusals and accessors.

use super::super::CONTEXT_NULL;
use super::info::*;
use super::*;

#[test]
fn process_report_refuses_zero_and_below_minus_one() {
    for t in [0, -2, i32::MIN] {
        assert_eq!(
            // SAFETY: plain values; no callback is involved.
            unsafe { aclrtProcessReport(t) },
            AclError::ACL_ERROR_INVALID_PARAM
        );
    }
}

#[test]
fn process_report_needs_a_subscribed_thread() {
    assert_eq!(
        // SAFETY: plain values.
        unsafe { aclrtProcessReport(1) },
        AclError::ACL_ERROR_RT_THREAD_SUBSCRIBE
    );
}

#[test]
fn entry_points_need_a_bound_thread() {
    unsafe extern "C" fn nothing(_: *mut c_void) {}
    // SAFETY: NULL handles are refused before any use.
    unsafe {
        assert_eq!(aclrtSubscribeReport(1, std::ptr::null_mut()), CONTEXT_NULL);
        assert_eq!(
            aclrtUnSubscribeReport(1, std::ptr::null_mut()),
            CONTEXT_NULL
        );
        assert_eq!(
            aclrtLaunchCallback(Some(nothing), std::ptr::null_mut(), 0, std::ptr::null_mut()),
            CONTEXT_NULL
        );
        assert_eq!(
            aclrtLaunchCallback(Some(nothing), std::ptr::null_mut(), 2, std::ptr::null_mut()),
            AclError::ACL_ERROR_INVALID_PARAM
        );
    }
}

#[test]
fn accessors_answer_all_ones_for_null() {
    // SAFETY: NULL is allowed.
    unsafe {
        assert_eq!(
            aclrtGetDeviceIdFromExceptionInfo(std::ptr::null()),
            u32::MAX
        );
        assert_eq!(
            aclrtGetStreamIdFromExceptionInfo(std::ptr::null()),
            u32::MAX
        );
    }
    let info = ExceptionInfo {
        device_id: 7,
        stream_id: 3,
        ..ExceptionInfo::default()
    };
    // SAFETY: a valid info for the call.
    unsafe {
        assert_eq!(aclrtGetDeviceIdFromExceptionInfo(&raw const info), 7);
        assert_eq!(aclrtGetStreamIdFromExceptionInfo(&raw const info), 3);
    }
}
