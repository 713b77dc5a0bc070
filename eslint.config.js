// Lint configuration: typescript-eslint recommended rules plus the house rules of STYLE.md.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.gatehouse/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', structuredClone: 'readonly', queueMicrotask: 'readonly', performance: 'readonly', fetch: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
      eqeqeq: ['error', 'always'],
    },
  },
  {
    // The CLI prints to the terminal by design; tests and benchmarks report.
    files: ['bin/**', 'src/cli/**', 'bench/**', 'test/**'],
    rules: { 'no-console': 'off' },
  },
  {
    // The console's own browser script (served as a static asset; no build step).
    files: ['src/admin/console/assets/**/*.js'],
    languageOptions: { sourceType: 'script', globals: { window: 'readonly', document: 'readonly', navigator: 'readonly', getComputedStyle: 'readonly' } },
  },
  {
    // The pure governance core may not know any framework or driver (DESIGN §4).
    files: ['src/governance/**'],
    rules: {
      'no-restricted-imports': ['error', { patterns: ['fastify*', '@fastify/*', 'pg', 'pg-*', 'ioredis', 'kysely*', 'undici', '../store/*', '../coord/*', '../gateway/*', '../admin/*'] }],
    },
  },
);
