// Lint rules (npm run lint, run by .ci/run): typescript-eslint's recommended rules with type
// information, plus the ones that catch what a review of this code found: promises nobody
// awaits, type-only imports that are not marked so, and `any`.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'data/**', 'web/dist/**', 'drizzle.config.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      'no-empty': ['error', { allowEmptyCatch: true }],
      // Fastify plugins and interface methods are async without awaiting anything: not a bug.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // Each part is handed the slice of the configuration it reads (a section, or a small interface
    // naming the sections it reads); only the composition roots and config loading see the whole.
    files: ['src/**/*.ts'],
    // The worker processes' primary and worker start-ups are composition roots too (C56).
    ignores: ['src/app.ts', 'src/main.ts', 'src/config/**', 'src/cluster/primary.ts', 'src/cluster/worker.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/config/schema.ts'],
              importNames: ['Config', 'ConfigSchema'],
              message:
                'Take the part of the config this module reads (e.g. FaucetConfig, Pick<RpcConfig, ...>, or an interface naming the sections), not the whole Config: only app.ts, main.ts, src/cluster/ start-ups and src/config/ see it.',
            },
          ],
        },
      ],
    },
  },
  {
    // Tests read JSON answers freely; node:test's describe/test return promises the runner awaits.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'test', 'it', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] }] },
      ],
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { ...tseslint.configs.disableTypeChecked.languageOptions, globals: globals.node },
  },
);
