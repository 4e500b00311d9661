//! Fault injection: the faults a test can arm ([`Fault`], [`Kernel`]) and
//! the armed plan, countdowns that fire on the n-th matching call, kernel
//! start, record or status write.

use std::time::Duration;

use crate::driver::{DriverErrorKind, Op};

/// Which kernel a [`Fault::KernelFault`] targets.
///
/// ```
/// use runclaim::sim::{Fault, Kernel};
///
/// let f = Fault::KernelFault { kernel: Kernel::Aicpu, nth: 1 }; // the next AICPU kernel faults
/// # let _ = f;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// The AICore kernel of a run.
    Aicore,
    /// The AICPU Run kernel of a run.
    Aicpu,
}

/// A fault to inject. Counts start at the moment of injection and are
/// 1-based: `nth: 1` is the next one.
///
/// ```
/// use runclaim::driver::{Driver, DriverErrorKind, Op};
/// use runclaim::sim::{Fault, SimDriver};
///
/// let sim = SimDriver::stepped(Default::default());
/// sim.inject(Fault::FailCall { op: Op::CreateStream, nth: 2 });
/// sim.create_stream()?;
/// assert_eq!(sim.create_stream().unwrap_err().kind(), &DriverErrorKind::Injected { nth: 2 });
/// sim.create_stream()?; // fires once
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The `nth` call of `op` fails with [`DriverErrorKind::Injected`] and has no
    /// effect.
    FailCall {
        /// The operation.
        op: Op,
        /// Which call.
        nth: u64,
    },
    /// The `nth` driver call of any operation fails with
    /// [`DriverErrorKind::Injected`] and has no effect (for sweeps).
    FailAnyCall {
        /// Which call.
        nth: u64,
    },
    /// The `nth` kernel of this kind to start raises an exception: its
    /// stream enters a sticky error state and drops its queued work.
    KernelFault {
        /// Which kernel kind.
        kernel: Kernel,
        /// Which start.
        nth: u64,
    },
    /// The `nth` AICPU kernel to write its status reports run error `code`
    /// (a known run error, not a device fault).
    RunError {
        /// Which AICPU kernel.
        nth: u64,
        /// The error code (non-zero).
        code: u32,
    },
    /// The `nth` `record_event` never completes.
    EventNeverCompletes {
        /// Which record.
        nth: u64,
    },
    /// The `nth` `record_event` completes `delay` after the stream reaches it.
    DelayEvent {
        /// Which record.
        nth: u64,
        /// How late.
        delay: Duration,
    },
    /// From the `nth` driver call on, every call fails with
    /// [`DriverErrorKind::DeviceLost`] (sticky, like 507899).
    DeviceLost {
        /// Which call.
        nth: u64,
    },
}

#[derive(Debug, Clone)]
struct Armed {
    fault: Fault,
    /// Matching occurrences still to pass before it fires (1 = the next).
    left: u64,
}

/// What a record task should do when the stream reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RecordFate {
    pub never: bool,
    pub delay_ticks: u64,
}

#[derive(Debug, Default)]
pub(crate) struct FaultPlan {
    armed: Vec<Armed>,
    /// Set once a `DeviceLost` fault fired: every later call fails.
    pub lost: bool,
}

impl FaultPlan {
    pub fn arm(&mut self, fault: Fault) {
        let nth = match fault {
            Fault::FailCall { nth, .. }
            | Fault::FailAnyCall { nth }
            | Fault::KernelFault { nth, .. }
            | Fault::RunError { nth, .. }
            | Fault::EventNeverCompletes { nth }
            | Fault::DelayEvent { nth, .. }
            | Fault::DeviceLost { nth } => nth,
        };
        self.armed.push(Armed {
            fault,
            left: nth.max(1),
        });
    }

    pub fn clear(&mut self) {
        self.armed.clear();
    }

    /// Counts down every armed fault `matches` selects; returns the faults
    /// that fire now (in arming order) and disarms them.
    fn fire(&mut self, mut matches: impl FnMut(&Fault) -> bool) -> Vec<Fault> {
        let mut fired = Vec::new();
        self.armed.retain_mut(|a| {
            if !matches(&a.fault) {
                return true;
            }
            a.left -= 1;
            if a.left == 0 {
                fired.push(a.fault);
                false
            } else {
                true
            }
        });
        fired
    }

    /// Called at the start of every driver call: `Err` when the call must
    /// fail without effect.
    pub fn on_call(&mut self, op: Op) -> Result<(), DriverErrorKind> {
        if self.lost {
            return Err(DriverErrorKind::DeviceLost);
        }
        if self.armed.is_empty() {
            // Every driver call asks: the common answer, without a walk.
            return Ok(());
        }
        let mut result = Ok(());
        for f in self.fire(|f| match *f {
            Fault::FailCall { op: o, .. } => o == op,
            Fault::FailAnyCall { .. } | Fault::DeviceLost { .. } => true,
            _ => false,
        }) {
            match f {
                Fault::DeviceLost { .. } => {
                    self.lost = true;
                    result = Err(DriverErrorKind::DeviceLost);
                }
                Fault::FailCall { nth, .. } | Fault::FailAnyCall { nth } if result.is_ok() => {
                    result = Err(DriverErrorKind::Injected { nth });
                }
                _ => {}
            }
        }
        result
    }

    /// Called when a kernel starts: `true` when it must raise an exception.
    pub fn on_kernel_start(&mut self, kernel: Kernel) -> bool {
        !self
            .fire(|f| matches!(*f, Fault::KernelFault { kernel: k, .. } if k == kernel))
            .is_empty()
    }

    /// Called when an AICPU kernel writes its status: an injected run error.
    pub fn on_status(&mut self) -> Option<u32> {
        self.fire(|f| matches!(f, Fault::RunError { .. }))
            .into_iter()
            .find_map(|f| match f {
                Fault::RunError { code, .. } => Some(code.max(1)),
                _ => None,
            })
    }

    /// Called when a record is enqueued.
    pub fn on_record(&mut self, ticks_of: impl Fn(std::time::Duration) -> u64) -> RecordFate {
        let mut fate = RecordFate::default();
        for f in self.fire(|f| {
            matches!(
                f,
                Fault::EventNeverCompletes { .. } | Fault::DelayEvent { .. }
            )
        }) {
            match f {
                Fault::EventNeverCompletes { .. } => fate.never = true,
                Fault::DelayEvent { delay, .. } => {
                    fate.delay_ticks = fate.delay_ticks.saturating_add(ticks_of(delay));
                }
                _ => {}
            }
        }
        fate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_call_fires_once_on_the_nth_matching_call() {
        let mut p = FaultPlan::default();
        p.arm(Fault::FailCall {
            op: Op::Alloc,
            nth: 2,
        });
        assert!(p.on_call(Op::Free).is_ok());
        assert!(p.on_call(Op::Alloc).is_ok());
        assert_eq!(
            p.on_call(Op::Alloc),
            Err(DriverErrorKind::Injected { nth: 2 })
        );
        assert!(p.on_call(Op::Alloc).is_ok());
    }

    #[test]
    fn device_lost_is_sticky() {
        let mut p = FaultPlan::default();
        p.arm(Fault::DeviceLost { nth: 1 });
        assert_eq!(p.on_call(Op::Alloc), Err(DriverErrorKind::DeviceLost));
        assert_eq!(p.on_call(Op::Free), Err(DriverErrorKind::DeviceLost));
    }

    #[test]
    fn kernel_and_record_faults_count_their_own_occurrences() {
        let mut p = FaultPlan::default();
        p.arm(Fault::KernelFault {
            kernel: Kernel::Aicpu,
            nth: 2,
        });
        p.arm(Fault::EventNeverCompletes { nth: 1 });
        assert!(!p.on_kernel_start(Kernel::Aicore));
        assert!(!p.on_kernel_start(Kernel::Aicpu));
        assert!(p.on_kernel_start(Kernel::Aicpu));
        assert!(!p.on_kernel_start(Kernel::Aicpu));
        assert!(p.on_record(|_| 0).never);
        assert!(!p.on_record(|_| 0).never);
    }
}
