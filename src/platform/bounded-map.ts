const MAX_REMEMBERED = 10_000;

/**
 * Sets `name` in a map that forgets its oldest entry once it holds 10,000: an isolate's memories stay
 * bounded whatever clients send.
 */
export function remember<V>(map: Map<string, V>, name: string, value: V): void {
  map.delete(name);
  if (map.size >= MAX_REMEMBERED) map.delete(map.keys().next().value!);
  map.set(name, value);
}
