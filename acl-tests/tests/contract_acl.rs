//! The claim-contract suite through the `acl` driver: `libloading`, the C
//! launch structs and the ACL error codes, over the fake runtime library.

mod common;

contract_suite!(common::acl::Acl);

pipeline_suite!(common::acl::Acl);

/// The same suites under the reference runtime's a2a3 kernel ABI, through
/// the acl driver: the fake device speaks it (`runclaim_fake_device_model`),
/// the host builds its blocks and reads its epoch-stamped records
/// (`A2a3Abi`).
mod a2a3 {
    crate::contract_suite!(crate::common::acl::AclA2a3);

    crate::pipeline_suite!(crate::common::acl::AclA2a3);
}

/// The contract suite launching every run through capture and replay
/// (`common::replaying`), and the pipeline suite replaying every run,
/// through the acl driver's `aclmdlRI*` calls on the fake runtime, under
/// both kernel ABIs.
mod replay {
    crate::contract_suite!(crate::common::Replaying(crate::common::acl::Acl));

    crate::pipeline_suite!(crate::common::Replaying(crate::common::acl::Acl));

    mod a2a3 {
        crate::contract_suite!(crate::common::Replaying(crate::common::acl::AclA2a3));

        crate::pipeline_suite!(crate::common::Replaying(crate::common::acl::AclA2a3));
    }
}
