// Extism kernel imports this library uses (the as-pdk declarations, re-exported in one place so
// plugins and helpers never declare them twice).
export {
  alloc,
  free,
  length,
  load_u8,
  load_u64,
  store_u8,
  store_u64,
  input_length,
  input_load_u8,
  input_load_u64,
  output_set,
  error_set,
} from "@extism/as-pdk/lib/env";
