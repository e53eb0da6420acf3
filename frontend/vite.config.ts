/// <reference types="vitest/config" />
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The dev server proxies the API (and its SSE stream) to a local
// `slotkeeper serve`; the production build is embedded into the Go binary.
export default defineConfig({
  plugins: [react()],
  base: "./",
  server: {
    proxy: {
      "/api": { target: "http://localhost:8080", changeOrigin: false },
    },
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
  },
  test: {
    environment: "jsdom",
    globals: true,
    setupFiles: ["./src/test/setup.ts"],
    include: ["src/**/*.test.{ts,tsx}"],
    // A test's own bound (default 5 s): a page's first render under jsdom
    // on a loaded 2-core machine has come near it. Time inside the tests
    // is faked; this only catches a test that never ends.
    testTimeout: 60_000,
  },
});
