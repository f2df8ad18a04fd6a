/** Vite's `?raw` imports: a file's text (the tests read wrangler.toml this way). */
declare module "*?raw" {
  const text: string;
  export default text;
}
