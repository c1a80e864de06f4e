//! What identifies a lab's built binary: its length and a 64-bit hash of its
//! bytes. A run records it in its meta record (`binary`), and `cargo xtask
//! book` runs a lab again only when the binary it would run is not the one
//! that made the reader's last run, as a build tool reuses an artifact whose
//! inputs did not change. Not a cryptographic hash: it tells builds apart,
//! it does not defend against anyone.

use std::{fs::File, io::Read, path::Path};

/// `<length in hex>-<hash in hex>` of the file at `path`.
pub fn id_of(path: &Path) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut hash = Hash::default();
    let mut length: u64 = 0;
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hash.write(&buffer[..read]);
        length += read as u64;
    }
    Ok(format!("{length:x}-{:016x}", hash.finish()))
}

/// The identity of the running program (`/proc/self/exe`), if it can be read.
pub fn own_id() -> Option<String> {
    std::env::current_exe()
        .ok()
        .and_then(|path| id_of(&path).ok())
}

/// A word-at-a-time multiply-rotate hash: fast in the xtask's unoptimised
/// build too (its profile optimises this crate), and any changed byte
/// changes the result with overwhelming likelihood.
#[derive(Default)]
struct Hash {
    state: u64,
}

impl Hash {
    const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let word = u64::from_le_bytes(word.try_into().expect("a chunk of eight bytes"));
            self.mix(word);
        }
        for &byte in words.remainder() {
            self.mix(u64::from(byte) | 0x100);
        }
    }

    fn mix(&mut self, word: u64) {
        self.state = (self.state ^ word)
            .wrapping_mul(Self::MULTIPLIER)
            .rotate_left(29);
    }

    fn finish(&self) -> u64 {
        let mut state = self.state;
        state ^= state >> 33;
        state = state.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        state ^ (state >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_changed_byte_changes_the_id_and_the_same_bytes_keep_it() {
        let dir = std::env::temp_dir().join(format!("lab-kit-binary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bin");
        let mut bytes: Vec<u8> = (0..100_003u32).map(|n| (n % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let first = id_of(&path).unwrap();
        assert_eq!(id_of(&path).unwrap(), first);
        assert!(first.starts_with("186a3-"), "{first}");
        for at in [0, 7, 50_000, 100_002] {
            bytes[at] ^= 1;
            std::fs::write(&path, &bytes).unwrap();
            assert_ne!(id_of(&path).unwrap(), first, "byte {at}");
            bytes[at] ^= 1;
        }
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(id_of(&path).unwrap(), first);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(own_id().is_some());
    }
}
