//! The model a simulator runs, shared: [`ModelHandle`].

use std::fmt;
use std::sync::Arc;

use super::{A2a3Model, DeviceModel, RunclaimModel};

/// The [`DeviceModel`] a simulator runs, shared ([`SimConfig::device_model`](crate::driver::sim::SimConfig::device_model)).
///
/// Cheap to clone. Two handles are **equal when their models' names are**
/// (so `SimConfig`'s equality compares models by name: give a model of
/// your own a name of its own). The default is [`RunclaimModel`].
///
/// ```
/// use runclaim::sim::{A2a3Model, ModelHandle, RunclaimModel};
///
/// assert_eq!(ModelHandle::default(), ModelHandle::new(RunclaimModel));
/// assert_eq!(ModelHandle::builtin("a2a3"), Some(ModelHandle::new(A2a3Model)));
/// assert_ne!(ModelHandle::new(A2a3Model), ModelHandle::default());
/// assert_eq!(format!("{:?}", ModelHandle::default()), "ModelHandle(\"runclaim\")");
/// assert!(ModelHandle::builtin("mine").is_none()); // only the built-ins by name
/// ```
#[derive(Clone)]
pub struct ModelHandle {
    model: Arc<dyn DeviceModel>,
}

impl ModelHandle {
    /// A handle on `model`.
    #[must_use]
    pub fn new(model: impl DeviceModel) -> Self {
        ModelHandle {
            model: Arc::new(model),
        }
    }

    /// A handle on a shared model.
    #[must_use]
    pub fn from_arc(model: Arc<dyn DeviceModel>) -> Self {
        ModelHandle { model }
    }

    /// A built-in model by name: `"runclaim"` ([`RunclaimModel`]) or
    /// `"a2a3"` ([`A2a3Model`]).
    #[must_use]
    pub fn builtin(name: &str) -> Option<Self> {
        match name {
            "runclaim" => Some(ModelHandle::new(RunclaimModel)),
            "a2a3" => Some(ModelHandle::new(A2a3Model)),
            _ => None,
        }
    }

    /// The model's name.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.model.name()
    }

    /// The model.
    #[must_use]
    pub fn model(&self) -> &dyn DeviceModel {
        &*self.model
    }
}

impl Default for ModelHandle {
    fn default() -> Self {
        ModelHandle::new(RunclaimModel)
    }
}

impl fmt::Debug for ModelHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ModelHandle").field(&self.name()).finish()
    }
}

impl PartialEq for ModelHandle {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ModelHandle {}

impl<M: DeviceModel> From<M> for ModelHandle {
    fn from(model: M) -> Self {
        ModelHandle::new(model)
    }
}

impl From<Arc<dyn DeviceModel>> for ModelHandle {
    fn from(model: Arc<dyn DeviceModel>) -> Self {
        ModelHandle::from_arc(model)
    }
}
