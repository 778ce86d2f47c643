//! Who a control client is, from the socket itself.
//!
//! The kernel records a Unix socket client's credentials when it connects: `SO_PEERCRED`
//! (user, primary group; tokio's `UnixStream::peer_cred`) and `SO_PEERGROUPS` (its
//! supplementary groups, [`supplementary_groups`]). Reading them needs no other file:
//! `/proc/<pid>/status` could belong to another process by the time it is read (the client
//! exits, its PID is reused), and looking the user up in the group database (NSS) can block.
//!
//! One of the daemon's three unsafe blocks: a `getsockopt` call that `nix` does not wrap (the
//! others are `madvise` on its own program, [`crate::resident::shed_program`], and the
//! `sigaction` of [`crate::interrupt::install`]).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// The most supplementary groups a process can have (`NGROUPS_MAX` on Linux).
pub const MAX_GROUPS: usize = 65_536;

/// The supplementary groups the peer of `socket` had when it connected (`SO_PEERGROUPS`,
/// Linux 4.13 and later).
pub fn supplementary_groups(socket: &impl AsFd) -> io::Result<Vec<u32>> {
    let fd = socket.as_fd().as_raw_fd();
    let gid_size = std::mem::size_of::<libc::gid_t>();
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let bytes = groups.len() * gid_size;
        let mut len = libc::socklen_t::try_from(bytes).map_err(io::Error::other)?;
        // SAFETY: `groups` is an initialised, writable buffer of `len` bytes that outlives the
        // call; the kernel writes at most `len` bytes into it and stores in `len` how many it
        // wrote (or, failing with ERANGE, how many it needs). `fd` is borrowed from `socket`,
        // so it stays open for the call.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &raw mut len,
            )
        };
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if rc == 0 {
            groups.truncate(len.min(bytes) / gid_size);
            return Ok(groups);
        }
        let err = io::Error::last_os_error();
        let needed = len.div_ceil(gid_size);
        if err.raw_os_error() == Some(libc::ERANGE) && needed > groups.len() && needed <= MAX_GROUPS
        {
            groups.resize(needed, 0);
            continue;
        }
        return Err(err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_come_from_the_socket() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("socketpair");
        let got = supplementary_groups(&a).expect("SO_PEERGROUPS");
        let mut ours: Vec<u32> = nix::unistd::getgroups()
            .expect("getgroups")
            .into_iter()
            .map(nix::unistd::Gid::as_raw)
            .collect();
        let mut got_sorted = got.clone();
        got_sorted.sort_unstable();
        ours.sort_unstable();
        assert_eq!(got_sorted, ours);
    }
}
