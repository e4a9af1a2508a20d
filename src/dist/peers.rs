//! Where each rank runs (process id and node), exchanged once at the start, so that a rank
//! stopped by the launcher can tell whether a peer on its node is gone and name it.

/// A rank's process: its pid and a hash of its node's host name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub pid: u32,
    pub host: u64,
}

impl Peer {
    /// This process.
    pub fn this() -> Self {
        Self { pid: std::process::id(), host: fnv1a(hostname().as_bytes()) }
    }

    /// Packed into one value for an all-gather: the host hash's upper 32 bits and the pid.
    pub fn pack(self) -> u64 {
        (self.host & !0xffff_ffff) | u64::from(self.pid)
    }

    pub fn unpack(v: u64) -> Self {
        Self { pid: (v & 0xffff_ffff) as u32, host: v & !0xffff_ffff }
    }

    /// Whether this peer runs on this process's node.
    pub fn same_node(self, me: Peer) -> bool {
        self.host == Peer::unpack(me.pack()).host
    }
}

/// Whether process `pid` is gone: no `/proc/PID`, or a zombie waiting to be reaped.
pub fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // "PID (comm) S …": the state follows the last ')' (comm may hold any character).
        Ok(stat) => {
            stat.rsplit_once(')').is_none_or(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('Z' | 'X')))
        }
    }
}

/// This node's host name.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer it is given.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if ok { String::from_utf8_lossy(&buf[..end]).into_owned() } else { "unknown".into() }
}

/// FNV-1a: the same 64 bits for the same name in every process.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_survives_packing_and_a_dead_process_is_gone() {
        let me = Peer::this();
        let back = Peer::unpack(me.pack());
        assert_eq!(back.pid, me.pid);
        assert!(back.same_node(me));
        assert!(!Peer { pid: 1, host: 0 }.same_node(Peer { pid: 1, host: 1 << 40 }));
        assert!(!gone(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(gone(pid), "a reaped child is gone");
        // FNV-1a's published test vector.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
