//! The workload's only unsafe code: memory mappings, the page size and the stop signal handler.
//!
//! Everything else in the crate is safe Rust over the `&mut [u8]` a [`Region`] hands out.

// Justification: mmap/munmap, sysconf and sigaction are plain libc calls with no safe std
// equivalent; each unsafe block below states why it is sound.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::AsRawFd;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};

/// A private read/write memory mapping, unmapped on drop; it dereferences to its bytes.
#[derive(Debug)]
pub struct Region {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Region owns its mapping exclusively, exactly like a `Box<[u8]>`: no other Rust
// value points into it, so moving it to or sharing `&Region` with another thread is sound.
unsafe impl Send for Region {}
// SAFETY: see `Send`; `&Region` only gives out `&[u8]`.
unsafe impl Sync for Region {}

impl Region {
    /// Maps `len` bytes of fresh, zero-filled anonymous memory (not faulted in yet).
    ///
    /// Transparent huge pages are turned off for it (best effort), so a touch faults in and
    /// reclaim swaps out one base page at a time, whatever the kernel's THP default is.
    pub fn anonymous(len: usize) -> io::Result<Region> {
        let region = Self::map(
            len,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
        )?;
        // SAFETY: the range is exactly the mapping just created and owned by `region`;
        // MADV_NOHUGEPAGE only changes a paging hint, never the contents. A kernel without
        // THP rejects it with EINVAL, which is harmless, so the result is ignored.
        unsafe {
            libc::madvise(
                region.ptr.as_ptr().cast(),
                region.len,
                libc::MADV_NOHUGEPAGE,
            );
        }
        Ok(region)
    }

    /// Maps the first `len` bytes of `file` shared, so writes go to the file's page cache.
    ///
    /// The file must be at least `len` bytes long and must not be truncated by anybody else
    /// while mapped (the access would raise SIGBUS); the workload creates its files itself.
    pub fn shared_file(file: &File, len: usize) -> io::Result<Region> {
        Self::map(len, libc::MAP_SHARED, file.as_raw_fd())
    }

    fn map(len: usize, flags: libc::c_int, fd: libc::c_int) -> io::Result<Region> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot map 0 bytes",
            ));
        }
        // SAFETY: a null address hint lets the kernel pick an unused range, so the new mapping
        // aliases no existing Rust memory; `fd` is either -1 (anonymous) or borrowed from a
        // live `File`; the result is checked against MAP_FAILED before it is used.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(addr.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null address"))?;
        Ok(Region { ptr, len })
    }
}

impl Deref for Region {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` is a readable mapping owned by `self` for its whole life;
        // every byte pattern is a valid `u8`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Region {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` guarantees this is the only live view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, and no slice borrowed from
        // `self` can outlive it. A failure only leaks address space, so it is ignored.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// The kernel's page size in bytes (4096 when sysconf cannot tell).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions and only reads a system constant.
    let raw = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(raw)
        .ok()
        .filter(|&size| size > 0)
        .unwrap_or(4096)
}

static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_signal: libc::c_int) {
    STOP_REQUESTED.store(true, Ordering::Relaxed);
}

/// Makes SIGTERM and SIGINT set a flag that [`stop_requested`] reports, instead of killing us.
pub fn install_stop_handlers() -> io::Result<()> {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: an all-zero `sigaction` is a valid value (no flags, empty mask) that is then
        // filled in; the handler only stores to an atomic, which is async-signal-safe.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction =
                on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether SIGTERM or SIGINT has arrived since [`install_stop_handlers`].
pub fn stop_requested() -> bool {
    STOP_REQUESTED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_region_is_zeroed_and_writable() {
        let mut region = Region::anonymous(3 * page_size()).expect("mmap of 3 pages");
        assert!(region.iter().all(|&b| b == 0));
        region[page_size()] = 7;
        assert_eq!(region[page_size()], 7);
        assert_eq!(region.len(), 3 * page_size());
    }

    #[test]
    fn zero_length_mapping_is_an_error_not_a_panic() {
        assert!(Region::anonymous(0).is_err());
    }

    #[test]
    fn shared_file_mapping_writes_reach_the_file() {
        let mut file = tempfile::tempfile().expect("temp file");
        let len = page_size();
        file.set_len(u64::try_from(len).expect("page size fits u64"))
            .expect("set_len");
        {
            let mut region = Region::shared_file(&file, len).expect("mmap file");
            region[0] = 0xab;
        }
        let mut bytes = Vec::new();
        use std::io::{Read, Seek};
        file.rewind().expect("rewind");
        file.read_to_end(&mut bytes).expect("read back");
        assert_eq!(bytes.first(), Some(&0xab));
    }

    #[test]
    fn page_size_is_a_power_of_two() {
        assert!(page_size().is_power_of_two());
    }
}
