// A promise raced against a timer, the timer cleared however the race ends (a timer left running
// kept a scrape's or a probe's process busy, on Deno too).

/** `promise`'s outcome, or `late()`'s (its value, or what it throws) once `ms` have passed first. */
export function within<T, L>(promise: Promise<T>, ms: number, late: () => L): Promise<T | L> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<L>((resolve, reject) => {
    timer = setTimeout(() => {
      try {
        resolve(late());
      } catch (err) {
        reject(err);
      }
    }, ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}
