//! How a lane launches its run: launched, or — when its pipeline replays
//! ([`Pipeline::replay`](crate::Pipeline::replay)) — replayed from its
//! slot's capture: captured at the lane's first run, re-captured when a
//! submission's shape differs from the capture (or the capture went stale),
//! and launched as before where the driver or the adapter cannot replay.

use crate::contract::error::{Error, ErrorKind, ReplayRefusal};
use crate::contract::port::{How, Port};
use crate::contract::run::RunOf;
use crate::contract::slot::Claim;
use crate::contract::states::{Launched, Prepared};
use crate::contract::workload::Workload;

/// A lane's replay: off, wanted (no capture yet), its slot's capture, or
/// unavailable (the driver or the adapter refused a capture).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Replay {
    #[default]
    Off,
    Wanted,
    Captured(u64),
    Unavailable,
}

impl Replay {
    /// The capture held, if any.
    pub(crate) fn capture(self) -> Option<u64> {
        match self {
            Replay::Captured(id) => Some(id),
            _ => None,
        }
    }
}

type Launch<K> = Result<RunOf<Launched, K>, Error<Option<RunOf<Prepared, K>>>>;

/// Whether a replay's refusal asks for a new capture (what the run differs
/// in, or a stale capture), rather than an error to hand back.
fn recapture(kind: &ErrorKind) -> bool {
    matches!(kind, ErrorKind::Replay(r) if !matches!(**r,
        ReplayRefusal::DriverCannotCapture | ReplayRefusal::AdapterCannotReplay))
}

/// Launches `prepared` (from `lent`, a pipeline's workload) as `replay`
/// says, moving `replay` on: a capture made, dropped, or found unavailable.
#[inline]
pub(crate) fn launch<K: Claim>(
    prepared: RunOf<Prepared, K>,
    mut lent: Option<&mut Workload<'_>>,
    replay: &mut Replay,
    port: &dyn Port,
) -> Launch<K> {
    let id = match *replay {
        Replay::Off | Replay::Unavailable => return prepared.launch_with(lent),
        Replay::Wanted => return capture(prepared, lent, replay),
        Replay::Captured(id) => id,
    };
    let how = How::Replay {
        device: port.device_id(),
        id,
    };
    match prepared.launch_how(lent.as_deref_mut(), how) {
        Ok((run, _)) => Ok(run),
        Err(e) if recapture(e.kind()) => {
            port.drop_capture(id);
            *replay = Replay::Wanted;
            match e.into_parts() {
                (Some(prepared), _) => capture(prepared, lent, replay),
                (None, e) => Err(e.map_value(|()| None)),
            }
        }
        Err(e) => Err(e),
    }
}

/// Captures `prepared` as its slot's capture; where capture is refused as
/// unavailable, launches it, and the lane launches from now on.
fn capture<K: Claim>(
    prepared: RunOf<Prepared, K>,
    mut lent: Option<&mut Workload<'_>>,
    replay: &mut Replay,
) -> Launch<K> {
    match prepared.launch_how(lent.as_deref_mut(), How::Capture) {
        Ok((run, id)) => {
            *replay = Replay::Captured(id);
            Ok(run)
        }
        Err(e) if matches!(e.kind(), ErrorKind::Replay(_)) => {
            *replay = Replay::Unavailable;
            match e.into_parts() {
                (Some(prepared), _) => prepared.launch_with(lent),
                (None, e) => Err(e.map_value(|()| None)),
            }
        }
        Err(e) => Err(e),
    }
}
