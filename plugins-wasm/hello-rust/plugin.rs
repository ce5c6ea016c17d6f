// hookbox example plugin in Rust: `#![no_std]`, no crates, built by plugins-wasm/build.mjs with
//   /usr/bin/rustc --edition 2021 --target wasm32-unknown-unknown --crate-type cdylib -O -C panic=abort -C strip=symbols plugin.rs
// It talks to the host only through Extism's kernel (`extism:host/env`: input, output, memory
// blocks, error) and hookbox's host functions (`extism:host/user`: the input in one copy, log, KV). Exports return 0 on
// success; anything else is a failure whose text is the message given to `error_set`.
#![no_std]

#[link(wasm_import_module = "extism:host/env")]
extern "C" {
    fn input_length() -> u64;
    fn input_load_u8(offset: u64) -> u8;
    fn alloc(len: u64) -> u64;
    fn free(offset: u64);
    fn length(offset: u64) -> u64;
    fn load_u8(offset: u64) -> u8;
    fn store_u8(offset: u64, byte: u8);
    fn output_set(offset: u64, len: u64);
    fn error_set(offset: u64);
}

#[link(wasm_import_module = "extism:host/user")]
extern "C" {
    fn hookbox_input_read(dest: u64, len: u64) -> u64;
    fn hookbox_log(level: i32, msg: u64);
    fn hookbox_kv_get(session: u64, key: u64) -> u64;
    fn hookbox_kv_set(session: u64, key: u64, value: u64);
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

/// A fixed-capacity byte buffer: no allocator needed.
struct Buf {
    data: [u8; 1024],
    len: usize,
}

impl Buf {
    fn new() -> Buf {
        Buf { data: [0; 1024], len: 0 }
    }
    fn push(&mut self, bytes: &[u8]) -> &mut Buf {
        for &b in bytes {
            if self.len < self.data.len() {
                self.data[self.len] = b;
                self.len += 1;
            }
        }
        self
    }
    fn push_u64(&mut self, mut n: u64) -> &mut Buf {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..])
    }
    /// Appends `bytes` as the inside of a JSON string (quotes, backslashes, control bytes escaped).
    fn push_json_text(&mut self, bytes: &[u8]) -> &mut Buf {
        for &b in bytes {
            match b {
                b'"' => self.push(b"\\\""),
                b'\\' => self.push(b"\\\\"),
                0..=0x1f => self.push(b" "),
                _ => self.push(&[b]),
            };
        }
        self
    }
    fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

/// Copies bytes into a new Extism memory block (the host frees blocks after the call).
fn store(bytes: &[u8]) -> u64 {
    unsafe {
        let offset = alloc(bytes.len() as u64);
        for (i, &b) in bytes.iter().enumerate() {
            store_u8(offset + i as u64, b);
        }
        offset
    }
}

/// The most input a call takes: a larger one fails the call (cut short, its JSON would be misread).
/// A payload can be large: on_session_delete lists every deleted id, about 40 bytes each.
const INPUT_BYTES: usize = 512 * 1024;
static mut INPUT: [u8; INPUT_BYTES] = [0; INPUT_BYTES];

/// The call's whole input, or None when it is larger than INPUT_BYTES. One host call copies it
/// (hookbox_input_read); where that answers 0, it is read a byte at a time.
fn input() -> Option<&'static [u8]> {
    let n = unsafe { input_length() } as usize;
    if n > INPUT_BYTES {
        return None;
    }
    unsafe {
        if hookbox_input_read(INPUT.as_mut_ptr() as u64, n as u64) != n as u64 {
            for i in 0..n {
                INPUT[i] = input_load_u8(i as u64);
            }
        }
        Some(&INPUT[..n])
    }
}

const TOO_LARGE: &[u8] = b"the input is larger than INPUT_BYTES (512 KiB)";

/// The raw text of the JSON string field `"key":"..."` (escapes kept as written), if present.
fn string_field<'a>(json: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut pattern = Buf::new();
    pattern.push(b"\"").push(key).push(b"\":\"");
    let p = pattern.bytes();
    let start = json.windows(p.len()).position(|w| w == p)? + p.len();
    let mut end = start;
    while end < json.len() && json[end] != b'"' {
        end += if json[end] == b'\\' { 2 } else { 1 };
    }
    json.get(start..end)
}

fn log(level: i32, msg: &[u8]) {
    unsafe { hookbox_log(level, store(msg)) }
}

fn fail(msg: &[u8]) -> i32 {
    unsafe { error_set(store(msg)) };
    1
}

/// The plugin-wide counter "greetings", read and incremented in KV.
fn count_greeting() -> u64 {
    let (scope, key) = (store(b""), store(b"greetings"));
    let mut n: u64 = 0;
    unsafe {
        let value = hookbox_kv_get(scope, key);
        if value != 0 {
            for i in 0..length(value) {
                let d = load_u8(value + i);
                if d.is_ascii_digit() {
                    n = n * 10 + (d - b'0') as u64;
                }
            }
            free(value);
        }
        let mut text = Buf::new();
        text.push_u64(n + 1);
        hookbox_kv_set(scope, key, store(text.bytes()));
    }
    n + 1
}

#[no_mangle]
pub extern "C" fn on_session_start() -> i32 {
    let payload = match input() {
        Some(p) => p,
        None => return fail(TOO_LARGE),
    };
    let mut line = Buf::new();
    line.push(b"session started: ").push(string_field(payload, b"session_id").unwrap_or(b"?"));
    log(1, line.bytes());
    0
}

#[no_mangle]
pub extern "C" fn command_hello_rust() -> i32 {
    let payload = match input() {
        Some(p) => p,
        None => return fail(TOO_LARGE),
    };
    let args = string_field(payload, b"raw_args").unwrap_or(b"");
    if args == b"fail" {
        return fail(b"asked to fail (raw_args was \"fail\")");
    }
    let n = count_greeting();
    let mut out = Buf::new();
    out.push(b"{\"text\":\"hello from Rust");
    if !args.is_empty() {
        // At most 200 bytes of them (cut at a character's start), so the answer fits its buffer
        // whole: a JSON text cut short would come back as plain text.
        let mut end = args.len().min(200);
        while end < args.len() && args[end] & 0xc0 == 0x80 {
            end -= 1;
        }
        out.push(b", ").push_json_text(&args[..end]);
    }
    out.push(b" (greeting #").push_u64(n).push(b")\"}");
    unsafe { output_set(store(out.bytes()), out.len as u64) };
    0
}
