// Extism kernel imports this library uses (import module "extism:host/env"), declared here so the
// library needs no other package (it is usable from outside this repo as @hookbox/plugin-lib).
// @ts-ignore: decorator
@external("extism:host/env", "alloc")
export declare function alloc(len: u64): u64;
// @ts-ignore: decorator
@external("extism:host/env", "free")
export declare function free(offset: u64): void;
// @ts-ignore: decorator
@external("extism:host/env", "length")
export declare function length(offset: u64): u64;
// @ts-ignore: decorator
@external("extism:host/env", "load_u8")
export declare function load_u8(offset: u64): u8;
// @ts-ignore: decorator
@external("extism:host/env", "load_u64")
export declare function load_u64(offset: u64): u64;
// @ts-ignore: decorator
@external("extism:host/env", "store_u8")
export declare function store_u8(offset: u64, value: u8): void;
// @ts-ignore: decorator
@external("extism:host/env", "store_u64")
export declare function store_u64(offset: u64, value: u64): void;
// @ts-ignore: decorator
@external("extism:host/env", "input_length")
export declare function input_length(): u64;
// @ts-ignore: decorator
@external("extism:host/env", "input_load_u8")
export declare function input_load_u8(offset: u64): u8;
// @ts-ignore: decorator
@external("extism:host/env", "input_load_u64")
export declare function input_load_u64(offset: u64): u64;
// @ts-ignore: decorator
@external("extism:host/env", "output_set")
export declare function output_set(offset: u64, len: u64): void;
// @ts-ignore: decorator
@external("extism:host/env", "error_set")
export declare function error_set(offset: u64): void;
