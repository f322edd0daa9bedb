/**
 * `import text from "./file.md?raw"`: Vite bundles the file's text into the test, which runs in
 * workerd without a file system (test/api/metrics.test.ts reads docs/OBSERVABILITY.md so).
 */
declare module "*?raw" {
  const text: string;
  export default text;
}
