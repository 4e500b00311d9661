//! `acl-tests`: the `acl` driver tested end to end — `libloading`, the C
//! structs, the error codes, the claim-contract suite — through the fake
//! runtime libraries (`fake-acl`, `-lite`, `-incomplete`). Everything is in
//! `tests/`; this library is empty.
