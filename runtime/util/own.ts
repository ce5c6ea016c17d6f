/**
 * `record[key]` when the record itself holds it: a plugin or command may be named "constructor" or
 * "toString", which a plain object answers from its prototype (a function where a list was due:
 * a command named "constructor" made the server answer 500).
 */
export const ownValue = <T>(record: Readonly<Record<string, T>>, key: string): T | undefined =>
  Object.prototype.hasOwnProperty.call(record, key) ? record[key] : undefined;
