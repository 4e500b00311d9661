//! The claim-contract suite through the `acl` driver: `libloading`, the C
//! launch structs and the ACL error codes, over the fake runtime library.

mod common;

contract_suite!(common::acl::Acl);

pipeline_suite!(common::acl::Acl);
